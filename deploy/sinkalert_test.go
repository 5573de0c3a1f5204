package deploy

import (
	"os/exec"
	"testing"
)

// TestSinkDisabledAlert runs promtool's unit test of EdiwatchSinkDisabled
// (prometheus/sink_disabled_test.yml) against prometheus/rules.yml.
func TestSinkDisabledAlert(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", "prometheus/sink_disabled_test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestStandbysAlert runs promtool's unit test of
// EdiwatchPostProcessingWaitsForStandbys (prometheus/standbys_test.yml).
func TestStandbysAlert(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", "prometheus/standbys_test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
