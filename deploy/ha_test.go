package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// TestPatroniExample: deploy/ha/patroni.yml passes Patroni's own
// validator and asks for what the README promises: one synchronous
// standby, Patroni's say over it, and no promotion of a standby far
// behind.
func TestPatroniExample(t *testing.T) {
	patroni := os.Getenv("EDIWATCH_PATRONI")
	if patroni == "" {
		if testenv.InCI() {
			t.Fatal("EDIWATCH_PATRONI is not set: run the tests with scripts/test.sh")
		}
		t.Skip("EDIWATCH_PATRONI not set")
	}
	out, err := exec.Command(patroni, "--validate-config", "ha/patroni.yml").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("patroni --validate-config: %v\n%s", err, out)
	}
	b, _ := os.ReadFile("ha/patroni.yml")
	for _, want := range []string{"synchronous_mode: true", "synchronous_node_count: 1", "maximum_lag_on_failover:"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("ha/patroni.yml lacks %q", want)
		}
	}
}

// TestHAConfigExample: deploy/ha/ediwatch.yaml is a valid configuration
// whose store waits for every streaming standby, names every node with
// read-write sessions, and keeps a journal.
func TestHAConfigExample(t *testing.T) {
	cfg, err := config.Load("ha/ediwatch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := cfg.Store.Standbys(); !all || cfg.Poller.Journal == "" ||
		!strings.Contains(cfg.Store.DSN, "target_session_attrs=read-write") || strings.Count(cfg.Store.DSN, ",") != 2 {
		t.Errorf("store %+v, journal %q", cfg.Store, cfg.Poller.Journal)
	}
}
