package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
)

// TestBadConfigs loads every testdata/*.bad.yaml and expects the error its
// first line names ("# error: ...").
func TestBadConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	if len(files) < 10 {
		t.Fatalf("%d bad configs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(b), "\n")
			want := strings.TrimPrefix(first, "# error: ")
			_, err = Load(f)
			if err == nil {
				t.Fatalf("loaded; want %q", want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error:\n%s\nwant it to contain:\n%s", err, want)
			}
			for _, secret := range []string{"hunter2", ":pw@"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error reveals a secret: %s", err)
				}
			}
		})
	}
}

func TestGoodConfigAndDefaults(t *testing.T) {
	c, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sources[0]
	if s.Name != "acme-era" || s.PollInterval.D() != time.Minute || s.After != "move:/outbound/archive" ||
		s.MaxFilesPerPoll != 1000 || s.MaxAttempts != 5 || s.Us != "ZZ:RIVERSIDE" {
		t.Errorf("source %+v", s)
	}
	if c.Retention.Keys.D() != 400*24*time.Hour || c.Relay.Workers != 8 || c.Sinks["ledger"].Timeout.D() != 30*time.Second {
		t.Errorf("defaults: %+v %+v", c.Retention, c.Relay)
	}
	if tls := c.Sinks["ledger"].TLS; tls != (SinkTLS{CAFile: "/etc/ediwatch/erp-ca.pem",
		CertFile: "/run/secrets/erp-client.crt", KeyFile: "/run/secrets/erp-client.key"}) || c.Sinks["acks"].TLS.Set() {
		t.Errorf("sink tls %+v, acks %+v", tls, c.Sinks["acks"].TLS)
	}
	if fmt.Sprint(c.Routes["payment.posted"]) != "[ledger]" || fmt.Sprint(c.Routes["ack.ta1"]) != "[acks]" {
		t.Errorf("routes %v", c.Routes)
	}
}

// TestExplicitZeroIsKept: a default fills an absent key, never a zero
// given on purpose.
func TestExplicitZeroIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  s: {url: "https://x.example.test/"}
routes: {payment.posted: s, claim.received: s, ack.999: s, ack.ta1: s}
sources:
  - {name: a, type: local, directories: [/in], stable_for: 0s}
  - {name: b, type: local, directories: [/in-b]}
`), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].StableFor != 0 || c.Sources[1].StableFor.D() != 30*time.Second || c.Sources[1].MaxAttempts != 5 {
		t.Errorf("stable_for %s and %s", c.Sources[0].StableFor, c.Sources[1].StableFor)
	}
}

// TestStabilityOptions: min_age and done_marker are off unless set;
// incomplete_grace defaults to 10m and an explicit 0s turns it off.
func TestStabilityOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  s: {url: "https://x.example.test/"}
routes: {payment.posted: s, claim.received: s, ack.999: s, ack.ta1: s}
sources:
  - {name: a, type: local, directories: [/in], min_age: 2m, done_marker: "{name}.ok", incomplete_grace: 0s}
  - {name: b, type: local, directories: [/in-b]}
`), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Sources[0], c.Sources[1]
	if a.MinAge.D() != 2*time.Minute || a.DoneMarker != "{name}.ok" || a.IncompleteGrace != 0 {
		t.Errorf("set: %+v", a)
	}
	if b.MinAge != 0 || b.DoneMarker != "" || b.IncompleteGrace.D() != 10*time.Minute {
		t.Errorf("defaults: %+v", b)
	}
}

// TestExpectEvery: a source's silence alarm is off unless expect_every is
// set, and a negative one is refused with its path.
func TestExpectEvery(t *testing.T) {
	load := func(extra string) (Config, error) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(path, []byte(`sinks:
  s: {url: "https://x.example.test/"}
routes: {payment.posted: s, claim.received: s, ack.999: s, ack.ta1: s}
sources:
  - {name: a, type: local, directories: [/in]`+extra+`}
  - {name: b, type: local, directories: [/in-b]}
`), 0o600)
		return Load(path)
	}
	c, err := load(", expect_every: 26h")
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].ExpectEvery.D() != 26*time.Hour || c.Sources[1].ExpectEvery != 0 {
		t.Errorf("expect_every: %v, %v", c.Sources[0].ExpectEvery, c.Sources[1].ExpectEvery)
	}
	if _, err := load(", expect_every: -1h"); err == nil || !strings.Contains(err.Error(), "sources[0].expect_every: must not be negative") {
		t.Errorf("negative expect_every: %v", err)
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	t.Setenv("EDIWATCH_STORE_DSN", "file:/tmp/other.db")
	t.Setenv("EDIWATCH_RELAY_WORKERS", "3")
	t.Setenv("EDIWATCH_RETENTION_KEYS", "500d")
	c, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.DSN != "file:/tmp/other.db" || c.Relay.Workers != 3 || c.Retention.Keys.String() != "500d" {
		t.Errorf("overrides not applied: %+v %+v %s", c.Store, c.Relay, c.Retention.Keys)
	}
	t.Setenv("EDIWATCH_LOG_LEVEL", "chatty")
	if _, err := Load("testdata/good.yaml"); err == nil || !strings.Contains(err.Error(), `log.level: must be debug, info, warn or error (got "chatty")`) {
		t.Errorf("bad override: %v", err)
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("postgres://u:p%40ss@h/db"); got != "postgres://u:[redacted]@h/db" {
		t.Errorf("%s", got)
	}
}

// TestEveryProblemReportedAtOnce: an unknown key does not hide the other
// errors in the file; each is named by its key path.
func TestEveryProblemReportedAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  ledger: {url: "https://erp.example.test/", timeoutt: 5s}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: ledger, ack.ta1: ledger}
relay: {wokers: 3}
log: {level: chatty}
sources:
  - {name: acme, type: local, directories: [/in], poll_intervall: 5m}
`), 0o600)
	_, err := Load(path)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		"sources[0].poll_intervall: unknown key (did you mean poll_interval?)",
		"sinks.ledger.timeoutt: unknown key (did you mean timeout?)",
		"relay.wokers: unknown key (did you mean workers?)",
		`log.level: must be debug, info, warn or error (got "chatty")`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error:\n%s\nwant it to contain:\n%s", err, want)
		}
	}
}

func TestNoSuggestionForAFarKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("colour: blue\n"), 0o600)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "colour: unknown key") || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("error: %v", err)
	}
}

// TestStoreMaxConns: the pool is sized for LISTEN, every source's
// downloads, the relay workers and a margin unless store.max_conns is set
// (from the file or the environment).
func TestStoreMaxConns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  s: {url: "https://x.example.test/"}
routes: {payment.posted: s, claim.received: s, ack.999: s, ack.ta1: s}
relay: {workers: 6}
sources:
  - {name: a, type: local, directories: [/in]}
  - {name: b, type: local, directories: [/in-b], downloads: 2}
`), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.StoreMaxConns(); got != 1+4+2+6+4 {
		t.Errorf("default max conns %d", got)
	}
	if c.Store.IngestTimeout.D() != 10*time.Minute {
		t.Errorf("ingest timeout %s", c.Store.IngestTimeout)
	}
	t.Setenv("EDIWATCH_STORE_MAX_CONNS", "3")
	t.Setenv("EDIWATCH_STORE_INGEST_TIMEOUT", "90s")
	c, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.StoreMaxConns() != 3 || c.Store.IngestTimeout.D() != 90*time.Second {
		t.Errorf("from the environment: %d %s", c.StoreMaxConns(), c.Store.IngestTimeout)
	}
}

// TestPlainHTTPSinks: http:// is accepted for loopback receivers, and for
// any other host only with allow_insecure.
func TestPlainHTTPSinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  local: {url: "http://127.0.0.1:8080/in"}
  local6: {url: "http://[::1]:8080/in"}
  named: {url: "http://localhost:8080/in"}
  lan: {url: "http://erp.internal/in", allow_insecure: true}
routes: {payment.posted: local, claim.received: local6, ack.999: named, ack.ta1: lan}
`), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Sinks["lan"].AllowInsecure || c.Sinks["local"].AllowInsecure {
		t.Errorf("allow_insecure %+v", c.Sinks)
	}
}

// TestSinkSettings: breaker, rate_limit, concurrency and mode are read per
// sink; a breaker key left out keeps the relay-wide default (5 failures,
// 30s), and a sink that sets none has no rate or concurrency limit and
// the structured mode.
func TestSinkSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  ledger:
    url: "https://erp.example.test/r"
    mode: binary
    breaker: {failures: 3}
    rate_limit: 2.5
    concurrency: 4
  acks: {url: "https://gw.example.test/acks", breaker: {cooldown: 2m}, rate_limit: 10}
  chat: {url: "https://chat.example.test/hook"}
`), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]outbox.SinkLimits{}
	for name, s := range c.Sinks {
		got[name] = s.RelayLimits()
	}
	want := map[string]outbox.SinkLimits{
		"ledger": {BreakerFailures: 3, BreakerCooldown: 30 * time.Second, RateLimit: 2.5, Concurrency: 4},
		"acks":   {BreakerFailures: 5, BreakerCooldown: 2 * time.Minute, RateLimit: 10},
		"chat":   {BreakerFailures: 5, BreakerCooldown: 30 * time.Second},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("sinks.%s: %+v, want %+v", name, got[name], w)
		}
	}
	if c.Sinks["ledger"].Mode != "binary" || c.Sinks["acks"].Mode != "structured" || c.Sinks["chat"].Mode != "structured" {
		t.Errorf("modes %q %q %q", c.Sinks["ledger"].Mode, c.Sinks["acks"].Mode, c.Sinks["chat"].Mode)
	}
}

// TestSourcesShareADirectoryByIncludePatterns: two sources may poll one
// directory when both set include patterns (theirs to keep apart), and
// one directory on two servers is two directories.
func TestSourcesShareADirectoryByIncludePatterns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  ledger: {url: "https://erp.example.test/remittances"}
  acks: {url: "https://gateway.example.test/acks"}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: acks, ack.ta1: acks}
sources:
  - {name: era, type: local, directories: [/in], include: ["*.835"]}
  - {name: claims, type: local, directories: [/in/], include: ["*.837"]}
  - {name: payer-a, type: sftp, address: "a.example.test:22", user: u, private_key_file: /k, known_hosts_file: /kh, directories: [/out]}
  - {name: payer-b, type: sftp, address: "b.example.test:22", user: u, private_key_file: /k, known_hosts_file: /kh, directories: [/out]}
`), 0o600)
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
}

// TestWaitForStandbys: store.wait_for_standbys is every streaming standby
// by default ("auto"), none for 0, and at least N for a number, written
// bare in YAML or set from the environment.
func TestWaitForStandbys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	for _, tc := range []struct {
		yaml string
		env  string
		all  bool
		n    int
	}{
		{"", "", true, 0},
		{"store: {wait_for_standbys: 0}\n", "", false, 0},
		{"store: {wait_for_standbys: 2}\n", "", false, 2},
		{"store: {wait_for_standbys: auto}\n", "1", false, 1},
	} {
		os.WriteFile(path, []byte(tc.yaml), 0o600)
		if tc.env != "" {
			t.Setenv("EDIWATCH_STORE_WAIT_FOR_STANDBYS", tc.env)
		}
		c, err := Load(path)
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if all, n := c.Store.Standbys(); all != tc.all || n != tc.n {
			t.Errorf("%q (env %q): all %v n %d, want %v %d", tc.yaml, tc.env, all, n, tc.all, tc.n)
		}
	}
}

// TestMultiHostDSNFromAFile: a DSN read from store.dsn_file that names
// several hosts must ask for read-write sessions, as store.dsn must.
func TestMultiHostDSNFromAFile(t *testing.T) {
	for dsn, ok := range map[string]bool{
		"postgres://ediwatch@db1:5432,db2:5432/ediwatch":                                             false,
		"postgres://ediwatch@db1:5432,db2:5432/ediwatch?target_session_attrs=any":                    false,
		"postgres://ediwatch@db1:5432,db2:5432/ediwatch?target_session_attrs=read-write":             true,
		"postgresql://ediwatch:pw@db1,db2/ediwatch?sslmode=verify-full&target_session_attrs=primary": true,
		"postgres://ediwatch@db1:5432/ediwatch":                                                      true,
		"host=db1,db2 user=ediwatch":                                                                 true, // keyword/value: the driver's
	} {
		if err := CheckPostgresDSN(dsn); (err == nil) != ok {
			t.Errorf("%s: %v", dsn, err)
		}
	}
}
