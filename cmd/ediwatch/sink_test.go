package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestSinkCommands: `sink disable` stops the claims of a sink's rows,
// `sink list` shows every configured sink with its redacted URL, state,
// reason and counts, `sink enable` makes the rows claimable again; an
// unknown sink name is a usage error (exit 2).
func TestSinkCommands(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "e.db")
	cfg := filepath.Join(dir, "ediwatch.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`store: {driver: sqlite, dsn: %q}
sinks:
  ledger: {url: "https://erp.example.test/hooks/T0/SECRET-TOKEN?sig=abc"}
  acks: {url: "https://gateway.example.test/acks"}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: acks, ack.ta1: acks}
`, "file:"+db)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	x12gen.Remit{Control: 31, Trace: "CLI-"}.Write(&b)
	if _, err := storetest.IngestNow(t, st, "r.835", b.Bytes()); err != nil {
		t.Fatal(err)
	}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, err := command(t, append(args, "--config", cfg)...).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d\n%s", args, code, wantCode, out)
		}
		return string(out)
	}
	list := func() map[string]sinkView {
		t.Helper()
		out := run(0, "sink", "list", "--json")
		views := map[string]sinkView{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var v sinkView
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			views[v.Name] = v
		}
		return views
	}
	if v := list(); len(v) != 2 || v["ledger"].State != "enabled" || v["ledger"].Pending != 1 || v["acks"].Pending != 1 {
		t.Errorf("list before: %+v", v)
	}
	if out := run(0, "sink", "disable", "ledger", "--reason", "receiver migration"); !strings.Contains(out, "disabled") {
		t.Errorf("disable: %s", out)
	}
	if out := run(0, "sink", "disable", "ledger"); !strings.Contains(out, "already disabled") || !strings.Contains(out, "receiver migration") {
		t.Errorf("disable again: %s", out)
	}
	v := list()
	if l := v["ledger"]; l.State != "disabled" || l.Reason != "receiver migration" || !strings.HasPrefix(l.By, "operator") ||
		l.Since == nil || l.Pending != 1 || v["acks"].State != "enabled" {
		t.Errorf("list after disable: %+v", v)
	}
	out := run(0, "sink", "list")
	if strings.Contains(out, "SECRET-TOKEN") || strings.Contains(out, "sig=abc") || !strings.Contains(out, "erp.example.test") ||
		!strings.Contains(out, "disabled") {
		t.Errorf("list shows the URL's secrets or not the state:\n%s", out)
	}
	rows, err := st.Claim(ctx, time.Now().UTC().Add(time.Minute), nil, 10, time.Minute)
	if err != nil || len(rows) != 1 || rows[0].Sink != "acks" {
		t.Fatalf("claimed %v %v, want only the acks row", rows, err)
	}
	for _, verb := range []string{"disable", "enable"} {
		if out := run(2, "sink", verb, "archive"); !strings.Contains(out, `no sink named "archive"`) {
			t.Errorf("%s an unknown sink: %s", verb, out)
		}
	}
	if out := run(0, "sink", "enable", "ledger"); !strings.Contains(out, "enabled: 1 rows waiting are due now") {
		t.Errorf("enable: %s", out)
	}
	if out := run(0, "sink", "enable", "ledger"); !strings.Contains(out, "was not disabled") {
		t.Errorf("enable again: %s", out)
	}
	if v := list(); v["ledger"].State != "enabled" || v["ledger"].Reason != "" {
		t.Errorf("list after enable: %+v", v)
	}
	rows, err = st.Claim(ctx, time.Now().UTC().Add(time.Minute), nil, 10, time.Minute)
	if err != nil || len(rows) != 1 || rows[0].Sink != "ledger" {
		t.Errorf("claimed %v %v after the enable, want the ledger row", rows, err)
	}
}
