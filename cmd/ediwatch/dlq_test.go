package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestDLQHidesPatientData: dead claim rows whose receiver echoed the
// payload: `dlq list` and `dlq show` print neither the patient control
// number (in the claim's effect key) nor the response, unless --show-phi.
func TestDLQHidesPatientData(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+db))
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	x12gen.Claims{Control: 9, Claims: 2, IDPrefix: "PCN8812-"}.Write(&b)
	now := time.Now().UTC()
	if _, err := inbox.Ingest(ctx, inbox.Options{Store: st, Routes: storetest.Routes}, inbox.FileInfo{Source: "t", Path: "c.x12",
		Size: int64(b.Len()), MTime: now, SHA256: "x", CorrelationID: "corr", Now: now}, bytes.NewReader(b.Bytes())); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Claim(ctx, now, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d %v", len(rows), err)
	}
	for _, r := range rows {
		st.Dead(ctx, r.ID, r.LeaseToken, now, outbox.Failure{HTTPStatus: 422, Error: "HTTP 422 Unprocessable Entity",
			Response: "rejected: " + string(r.Payload)})
	}
	st.Close()
	run := func(args ...string) string {
		t.Helper()
		out, err := command(t, append(args, "--config", cfg)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	id := fmt.Sprint(rows[0].ID)
	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "list", "--json"}, {"dlq", "show", id}} {
		out := run(args...)
		if strings.Contains(out, "PCN8812") || strings.Contains(out, "PATIENT") || strings.Contains(out, "rejected:") {
			t.Errorf("%v shows patient data:\n%s", args, out)
		}
		if !strings.Contains(out, "claim.received:sha256:") || !strings.Contains(out, "HTTP 422") {
			t.Errorf("%v does not identify the rows:\n%s", args, out)
		}
	}
	for _, args := range [][]string{{"dlq", "list", "--show-phi"}, {"dlq", "show", id, "--show-phi"}} {
		if out := run(args...); !strings.Contains(out, "PCN8812") || !strings.Contains(out, "rejected:") {
			t.Errorf("%v hides what was asked for:\n%s", args, out)
		}
	}
}
