package config

import "testing"

// TestConsoleOffUnlessConfiguredAndPlainHTTPOnlyOnLoopback: no console
// key leaves the console off; plain HTTP is accepted on loopback, and on
// another address only with TLS or allow_insecure.
func TestConsoleOffUnlessConfiguredAndPlainHTTPOnlyOnLoopback(t *testing.T) {
	c, err := loadYAML(t, "log: {level: info}\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Console.Enabled() {
		t.Errorf("console on by default: %+v", c.Console)
	}
	for _, yaml := range []string{
		`console: {listen: "127.0.0.1:9465", token_file: /t}`,
		`console: {listen: "localhost:9465", token_file: /t, admin_token_file: /a}`,
		`console: {listen: "[::1]:9465", token_file: /t}`,
		`console: {listen: "0.0.0.0:9465", token_file: /t, tls_cert_file: /c, tls_key_file: /k}`,
		`console: {listen: ":9465", token_file: /t, allow_insecure: true}`,
	} {
		c, err := loadYAML(t, yaml+"\n")
		if err != nil {
			t.Errorf("%s: %v", yaml, err)
			continue
		}
		if !c.Console.Enabled() {
			t.Errorf("%s: console off", yaml)
		}
	}
	for _, yaml := range []string{
		`console: {listen: ":9465", token_file: /t}`,
		`console: {listen: "192.0.2.7:9465", token_file: /t}`,
		`console: {listen: "console.example.test:9465", token_file: /t}`,
	} {
		if _, err := loadYAML(t, yaml+"\n"); err == nil {
			t.Errorf("%s: loaded; want it refused without TLS", yaml)
		}
	}
}

// TestConsoleFromTheEnvironment: the console's keys can be set from
// EDIWATCH_CONSOLE_* like every other scalar key.
func TestConsoleFromTheEnvironment(t *testing.T) {
	t.Setenv("EDIWATCH_CONSOLE_LISTEN", "127.0.0.1:9465")
	t.Setenv("EDIWATCH_CONSOLE_TOKEN_FILE", "/run/secrets/viewer")
	t.Setenv("EDIWATCH_CONSOLE_ADMIN_TOKEN_FILE", "/run/secrets/admin")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Console.Listen != "127.0.0.1:9465" || c.Console.TokenFile != "/run/secrets/viewer" ||
		c.Console.AdminTokenFile != "/run/secrets/admin" || c.Console.AllowInsecure {
		t.Errorf("console %+v", c.Console)
	}
	t.Setenv("EDIWATCH_CONSOLE_LISTEN", "0.0.0.0:9465")
	if _, err := Load(""); err == nil {
		t.Error("a plain console on 0.0.0.0 from the environment loaded")
	}
	t.Setenv("EDIWATCH_CONSOLE_ALLOW_INSECURE", "true")
	if _, err := Load(""); err != nil {
		t.Errorf("allow_insecure from the environment: %v", err)
	}
}
