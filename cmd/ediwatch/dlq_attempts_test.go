package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestDLQShowAttemptHistory: `dlq show ID` prints the row's attempts in
// order (time, status, latency, class, size), the receivers' response
// excerpts (which echo patient data) only with --show-phi.
func TestDLQShowAttemptHistory(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+db))
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	st := storeWithClaims(t, db, now, x12gen.Claims{Control: 21, Claims: 1, IDPrefix: "PCN4431-"})
	claim := func() outbox.Row {
		rows, err := st.Claim(ctx, now.Add(time.Minute), []string{"ledger"}, 10, time.Minute)
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %d %v", len(rows), err)
		}
		return rows[0]
	}
	r := claim()
	echo := "echo: " + string(r.Payload)
	if err := st.Retry(ctx, r.ID, r.LeaseToken, now, now, outbox.Failure{HTTPStatus: 503, Error: "HTTP 503 Service Unavailable",
		Response: echo, Attempt: &outbox.Attempt{At: now, Latency: 250 * time.Millisecond, HTTPStatus: 503, Class: "5xx",
			Error: "HTTP 503 Service Unavailable", ResponseSize: 4321, Response: echo}}); err != nil {
		t.Fatal(err)
	}
	r = claim()
	if err := st.Dead(ctx, r.ID, r.LeaseToken, now.Add(time.Second), outbox.Failure{HTTPStatus: 422,
		Error: "HTTP 422 Unprocessable Entity", Response: echo, Attempt: &outbox.Attempt{At: now.Add(time.Second),
			Latency: 12 * time.Millisecond, HTTPStatus: 422, Class: "4xx", Error: "HTTP 422 Unprocessable Entity",
			ResponseSize: 99, Response: echo}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	show := func(args ...string) (string, []map[string]any) {
		t.Helper()
		out, err := command(t, append([]string{"dlq", "show", fmt.Sprint(r.ID), "--config", cfg}, args...)...).Output()
		if err != nil {
			t.Fatalf("dlq show: %v\n%s", err, out)
		}
		var v struct {
			Attempts []map[string]any `json:"attempts"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("dlq show: %v\n%s", err, out)
		}
		return string(out), v.Attempts
	}
	out, attempts := show()
	if strings.Contains(out, "PCN4431") || strings.Contains(out, "echo:") {
		t.Errorf("dlq show prints patient data:\n%s", out)
	}
	want := []struct {
		status, size float64
		class        string
		latency      float64
		at           time.Time
	}{{503, 4321, "5xx", 250, now}, {422, 99, "4xx", 12, now.Add(time.Second)}}
	if len(attempts) != len(want) {
		t.Fatalf("attempts: %v", attempts)
	}
	for i, w := range want {
		a := attempts[i]
		if a["seq"] != float64(i+1) || a["attempt"] != float64(i+1) || a["status"] != w.status || a["class"] != w.class ||
			a["latency_ms"] != w.latency || a["response_size"] != w.size || a["at"] != w.at.Format(time.RFC3339Nano) {
			t.Errorf("attempt %d: %v, want %+v", i+1, a, w)
		}
		if _, ok := a["response"]; ok {
			t.Errorf("attempt %d shows the response without --show-phi", i+1)
		}
	}
	_, attempts = show("--show-phi")
	if len(attempts) != 2 || attempts[1]["response"] != echo {
		t.Errorf("--show-phi hides the responses: %v", attempts)
	}
}
