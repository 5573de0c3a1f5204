// Package deploy holds the deployment files; its tests check them with the
// tools available offline.
package deploy

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

func promtool(t *testing.T) string {
	p := os.Getenv("EDIWATCH_PROMTOOL")
	if p == "" {
		if testenv.InCI() {
			t.Fatal("EDIWATCH_PROMTOOL is not set: run the tests with scripts/test.sh")
		}
		t.Skip("EDIWATCH_PROMTOOL not set")
	}
	return p
}

func manifests(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile("kubernetes/ediwatch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			break
		}
		docs = append(docs, d)
	}
	return docs
}

func get(m any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			mm, _ := m.(map[string]any)
			m = mm[k]
		case int:
			s, _ := m.([]any)
			if k >= len(s) {
				return nil
			}
			m = s[k]
		}
	}
	return m
}

func TestPrometheusRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", "prometheus/rules.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The PrometheusRule carries exactly the same groups.
	b, _ := os.ReadFile("prometheus/rules.yml")
	var plain map[string]any
	yaml.Unmarshal(b, &plain)
	for _, d := range manifests(t) {
		if d["kind"] == "PrometheusRule" {
			if !reflect.DeepEqual(get(d, "spec", "groups"), plain["groups"]) {
				t.Error("kubernetes PrometheusRule differs from prometheus/rules.yml")
			}
			return
		}
	}
	t.Error("no PrometheusRule")
}

// TestKubernetesManifests checks the manifests' shape, and loads their
// configuration with ediwatch's own loader, so every key they use exists in
// the schema.
func TestKubernetesManifests(t *testing.T) {
	kinds := map[string]map[string]any{}
	for _, d := range manifests(t) {
		kinds[d["kind"].(string)] = d
	}
	for _, k := range []string{"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule"} {
		if kinds[k] == nil {
			t.Errorf("no %s", k)
		}
	}
	dep := kinds["Deployment"]
	pod := get(dep, "spec", "template", "spec")
	c := get(pod, "containers", 0)
	switch {
	case get(dep, "spec", "replicas") != 2:
		t.Error("replicas")
	case get(pod, "securityContext", "runAsNonRoot") != true:
		t.Error("runAsNonRoot")
	case get(c, "securityContext", "readOnlyRootFilesystem") != true:
		t.Error("readOnlyRootFilesystem")
	case get(c, "securityContext", "allowPrivilegeEscalation") != false:
		t.Error("allowPrivilegeEscalation")
	case get(c, "readinessProbe", "httpGet", "path") != "/readyz" || get(c, "livenessProbe", "httpGet", "path") != "/healthz":
		t.Error("probes")
	}
	cfgText := get(kinds["ConfigMap"], "data", "ediwatch.yaml").(string)
	path := filepath.Join(t.TempDir(), "ediwatch.yaml")
	os.WriteFile(path, []byte(cfgText), 0o600)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the ConfigMap's configuration does not load: %v", err)
	}
	if cfg.Store.Driver != "postgres" || cfg.Store.DSNFile == "" {
		t.Error("the Deployment runs two replicas: it needs postgres with a DSN from a secret file")
	}
	_, port, _ := net.SplitHostPort(cfg.HTTP.Listen)
	if get(c, "ports", 0, "containerPort") != mustAtoi(port) {
		t.Errorf("containerPort %v, http.listen %s", get(c, "ports", 0, "containerPort"), cfg.HTTP.Listen)
	}
	for _, f := range []string{cfg.Store.DSNFile, cfg.Sources[0].PrivateKeyFile, cfg.Sources[0].KnownHostsFile, cfg.Sinks["ledger"].SecretFile} {
		if !strings.HasPrefix(f, "/run/secrets/ediwatch/") {
			t.Errorf("%s is not on the mounted Secret", f)
		}
	}
	if strings.Contains(cfgText, "postgres://") || strings.Contains(cfgText, "whsec_") {
		t.Error("a secret is inline in the ConfigMap")
	}
}

func mustAtoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestSystemdUnit runs systemd-analyze verify on the unit with ExecStart
// pointed at a real binary; any output is a failure.
func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("systemd-analyze is not installed: run the tests with scripts/test.sh")
		}
		t.Skip("systemd-analyze not available")
	}
	unit, err := os.ReadFile("systemd/ediwatch.service")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ediwatch")
	self, _ := os.Executable()
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"acme_key", "ledger_hmac"} {
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600)
	}
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/ediwatch", bin)
	text = strings.ReplaceAll(text, "/etc/ediwatch/secrets/", dir+"/")
	path := filepath.Join(dir, "ediwatch.service")
	os.WriteFile(path, []byte(text), 0o644)
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, want := range []string{"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "StateDirectory=ediwatch", "Restart=on-failure"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %s", want)
		}
	}
}

// TestDockerfile checks what can be checked without a Docker engine: a
// static pure-Go build, a shell-less non-root final image.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	d := string(b)
	for _, want := range []string{"AS build", "CGO_ENABLED=0", "FROM gcr.io/distroless/static-debian12:nonroot",
		"USER nonroot:nonroot", `ENTRYPOINT ["/usr/local/bin/ediwatch"]`} {
		if !strings.Contains(d, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	stages := 0
	for _, line := range strings.Split(d, "\n") {
		if strings.HasPrefix(line, "FROM ") {
			stages++
		}
	}
	if stages != 2 {
		t.Errorf("%d stages, want a build stage and a final one", stages)
	}
}
