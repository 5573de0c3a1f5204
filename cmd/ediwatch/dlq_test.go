package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
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

// storeWithClaims opens a new SQLite store at db, migrated, each of files
// ingested as an 837 of its own at now.
func storeWithClaims(t *testing.T, db string, now time.Time, files ...x12gen.Claims) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		t.Fatal(err)
	}
	for i, f := range files {
		var b bytes.Buffer
		f.Write(&b)
		if _, err := inbox.Ingest(ctx, inbox.Options{Store: st, Routes: storetest.Routes}, inbox.FileInfo{Source: "t",
			Path: fmt.Sprintf("c%d.x12", i), Size: int64(b.Len()), MTime: now, SHA256: fmt.Sprint("x", i),
			CorrelationID: "corr", Now: now}, bytes.NewReader(b.Bytes())); err != nil {
			st.Close()
			t.Fatal(err)
		}
	}
	return st
}

// deadClaims ingests an 837 of two claims into a new SQLite store at db
// and dead-letters both claim rows at sink ledger with fail's failure.
func deadClaims(t *testing.T, db string, fail func(outbox.Row) outbox.Failure) []outbox.Row {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	st := storeWithClaims(t, db, now, x12gen.Claims{Control: 9, Claims: 2, IDPrefix: "PCN8812-"})
	defer st.Close()
	rows, err := st.Claim(ctx, now, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d %v", len(rows), err)
	}
	for _, r := range rows {
		if err := st.Dead(ctx, r.ID, r.LeaseToken, now, fail(r)); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

// TestDLQHidesPatientData: dead claim rows whose receiver echoed the
// payload: `dlq list` and `dlq show` print neither the patient control
// number (in the claim's effect key) nor the response, unless --show-phi.
func TestDLQHidesPatientData(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+db))
	rows := deadClaims(t, db, func(r outbox.Row) outbox.Failure {
		return outbox.Failure{HTTPStatus: 422, Error: "HTTP 422 Unprocessable Entity", Response: "rejected: " + string(r.Payload)}
	})
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

// TestDLQRecoveryByTime: `dlq list`, `replay` and `discard` select dead
// rows by when they died (--since, --until: RFC 3339 or a duration back
// from now) and by --kind; a replay or discard that names no rows is a
// usage error, never "every row".
func TestDLQRecoveryByTime(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+db))
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
	x12gen.Claims{Control: 11, Claims: 2, IDPrefix: "PCN77-"}.Write(&b)
	now := time.Now().UTC()
	if _, err := inbox.Ingest(ctx, inbox.Options{Store: st, Routes: storetest.Routes}, inbox.FileInfo{Source: "t", Path: "c.x12",
		Size: int64(b.Len()), MTime: now, SHA256: "x", CorrelationID: "corr", Now: now}, bytes.NewReader(b.Bytes())); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Claim(ctx, now, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d %v", len(rows), err)
	}
	old, recent := rows[0], rows[1]
	st.Dead(ctx, old.ID, old.LeaseToken, now.Add(-48*time.Hour), outbox.Failure{HTTPStatus: 500, Error: "down"})
	st.Dead(ctx, recent.ID, recent.LeaseToken, now.Add(-time.Hour), outbox.Failure{HTTPStatus: 500, Error: "down"})
	run := func(wantOK bool, args ...string) string {
		t.Helper()
		out, err := command(t, append(args, "--config", cfg)...).CombinedOutput()
		if (err == nil) != wantOK {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run(true, "dlq", "list", "--since", "24h", "--json"); strings.Count(out, "\n") != 1 ||
		!strings.Contains(out, fmt.Sprintf(`"id":%d`, recent.ID)) {
		t.Errorf("list --since 24h:\n%s", out)
	}
	if out := run(true, "dlq", "list", "--kind", "ack.999"); strings.Count(out, "\n") != 1 {
		t.Errorf("list --kind ack.999 shows rows:\n%s", out)
	}
	if out := run(false, "dlq", "replay"); !strings.Contains(out, "--all") {
		t.Errorf("replay without rows:\n%s", out)
	}
	if out := run(false, "dlq", "replay", "--since", "yesterday"); !strings.Contains(out, "RFC 3339") {
		t.Errorf("replay --since yesterday:\n%s", out)
	}
	if out := run(true, "dlq", "replay", "--since", now.Add(-24*time.Hour).Format(time.RFC3339)); !strings.HasPrefix(out, "1 rows") {
		t.Errorf("replay --since: %s", out)
	}
	if out := run(true, "dlq", "discard", "--until", "24h", "--kind", "claim.received"); !strings.HasPrefix(out, "1 rows") {
		t.Errorf("discard --until: %s", out)
	}
	for id, want := range map[int64]string{recent.ID: outbox.StatusPending, old.ID: outbox.StatusDiscarded} {
		if got, _ := st.GetOutbox(ctx, id); got.Status != want {
			t.Errorf("row %d: %s, want %s", id, got.Status, want)
		}
	}
}

// TestDLQReplayWarnsOfSinksNotConfigured: a replay of rows whose sink the
// configuration no longer defines (removed, or renamed) says that they
// will wait, instead of reporting them queued as if they would come.
func TestDLQReplayWarnsOfSinksNotConfigured(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	storeYAML := fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+db)
	withLedger := writeConfig(t, storeYAML)
	withoutLedger := filepath.Join(t.TempDir(), "ediwatch.yaml")
	if err := os.WriteFile(withoutLedger, []byte(storeYAML+`
sinks: {acks: {url: "https://gateway.example.test/acks"}}
routes: {payment.posted: acks, claim.received: acks, ack.999: acks, ack.ta1: acks}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	rows := deadClaims(t, db, func(outbox.Row) outbox.Failure { return outbox.Failure{HTTPStatus: 422, Error: "HTTP 422"} })
	replay := func(cfg string, id int64) string {
		t.Helper()
		out, err := command(t, "dlq", "replay", fmt.Sprint(id), "--config", cfg).CombinedOutput()
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := replay(withLedger, rows[0].ID); !strings.Contains(out, "1 rows queued") || strings.Contains(out, "warning") {
		t.Errorf("replay to a configured sink:\n%s", out)
	}
	out := replay(withoutLedger, rows[1].ID)
	if !strings.Contains(out, "1 rows queued") || !strings.Contains(out, `warning: 1 of them go to sink "ledger"`) {
		t.Errorf("replay to a sink the configuration lacks says nothing of it:\n%s", out)
	}
}

// TestDLQReplayWarnsOfPassedClaims: a dead claim event whose void was
// delivered after it died is listed by `dlq list --passed`, and its
// replay warns that it arrives after the void.
func TestDLQReplayWarnsOfPassedClaims(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+db))
	ctx := context.Background()
	now := time.Now().UTC()
	st := storeWithClaims(t, db, now, x12gen.Claims{Control: 30, Claims: 1, IDPrefix: "PCN8812-", Frequency: "1"},
		x12gen.Claims{Control: 31, Claims: 1, IDPrefix: "PCN8812-", Frequency: "8"}) // the claim, then its void
	original, err := st.Claim(ctx, now, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(original) != 1 {
		t.Fatalf("claim: %d %v", len(original), err)
	}
	st.Dead(ctx, original[0].ID, original[0].LeaseToken, now, outbox.Failure{HTTPStatus: 422, Error: "HTTP 422"})
	void, err := st.Claim(ctx, now, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(void) != 1 {
		t.Fatalf("claim the void: %d %v", len(void), err)
	}
	st.CompleteMany(ctx, []outbox.Completion{{ID: void[0].ID, Token: void[0].LeaseToken, HTTPStatus: 200}}, now)
	st.Close()
	run := func(args ...string) string {
		t.Helper()
		out, err := command(t, append(args, "--config", cfg)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("dlq", "list", "--passed"); !strings.Contains(out, fmt.Sprintf("\n%d ", original[0].ID)) {
		t.Errorf("dlq list --passed does not list the passed claim %d:\n%s", original[0].ID, out)
	}
	if out := run("dlq", "replay", "--all"); !strings.Contains(out, "1 rows queued") ||
		!strings.Contains(out, "warning: 1 of them are claim events a later event of the same claim") {
		t.Errorf("replay of a passed claim does not warn:\n%s", out)
	}
}
