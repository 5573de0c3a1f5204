package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// addEffects commits one file whose only rows are effects (inserted as
// acknowledgments are: no inbox key).
// Complete marks one claimed row delivered through CompleteMany: it
// returns store.ErrLeaseLost when the row's lease was lost.
func Complete(ctx context.Context, s outbox.Store, id int64, token string, now time.Time, httpStatus int) error {
	lost, err := s.CompleteMany(ctx, []outbox.Completion{{ID: id, Token: token, HTTPStatus: httpStatus}}, now)
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return store.ErrLeaseLost
	}
	return nil
}

func addEffects(t *testing.T, s store.Store, path string, effects ...outbox.Effect) {
	t.Helper()
	ctx := context.Background()
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: path, Size: 1, MTime: t0, SHA256: "sha-" + path,
		CorrelationID: store.NewCorrelationID(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Rollback()
	for _, e := range effects {
		if e.Payload == nil {
			e.Payload = json.RawMessage(`{}`)
		}
		if err := ing.AddAck(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
		t.Fatal(err)
	}
}

// testExtendLeasesFenced: a holder extends its leases so the reaper leaves
// the rows alone; a stale token extends nothing and is reported lost.
func testExtendLeasesFenced(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 2)
	rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, 10*time.Second)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %v %v", rows, err)
	}
	a, b := rows[0], rows[1]
	lost, err := s.ExtendLeases(ctx, []outbox.Held{{ID: a.ID, Token: a.LeaseToken}, {ID: b.ID, Token: "stale"}},
		t0.Add(8*time.Second), 10*time.Second)
	if err != nil || len(lost) != 1 || lost[0] != b.ID {
		t.Fatalf("extend: lost %v (%v), want [%d]", lost, err, b.ID)
	}
	// At t0+15s b's lease has lapsed, a's (extended to t0+18s) has not.
	if n, err := s.ReapExpired(ctx, t0.Add(15*time.Second)); err != nil || n != 1 {
		t.Fatalf("reap: %d %v, want only the row not extended", n, err)
	}
	if got, _ := s.GetOutbox(ctx, a.ID); got.Status != outbox.StatusInflight || !got.LeaseExpiresAt.Equal(t0.Add(18*time.Second)) {
		t.Errorf("extended row: %s until %s", got.Status, got.LeaseExpiresAt)
	}
	again, _ := s.Claim(ctx, t0.Add(15*time.Second), []string{"ledger"}, 10, 10*time.Second)
	if len(again) != 1 || again[0].ID != b.ID {
		t.Fatalf("reclaim: %v", again)
	}
	if lost, _ := s.ExtendLeases(ctx, []outbox.Held{{ID: b.ID, Token: b.LeaseToken}}, t0.Add(16*time.Second), time.Minute); len(lost) != 1 {
		t.Errorf("the first holder extended a row another claimer holds")
	}
	if err := Complete(ctx, s, a.ID, a.LeaseToken, t0.Add(16*time.Second), 200); err != nil {
		t.Fatal(err)
	}
	if lost, _ := s.ExtendLeases(ctx, []outbox.Held{{ID: a.ID, Token: a.LeaseToken}}, t0.Add(16*time.Second), time.Minute); len(lost) != 1 {
		t.Errorf("a delivered row's lease was extended")
	}
}

// testOrderIsPerSink: rows of one ordering key to different sinks do not
// wait for each other (one sink down must not block another); rows of one
// key to one sink still go one at a time, in order.
func testOrderIsPerSink(t *testing.T, s store.Store) {
	ctx := context.Background()
	addEffects(t, s, "acks.x12",
		outbox.Effect{Kind: "ack.999", Key: "k1", OrderingKey: "acks:ZZ:P", Sink: "gateway"},
		outbox.Effect{Kind: "ack.999", Key: "k2", OrderingKey: "acks:ZZ:P", Sink: "archive"},
		outbox.Effect{Kind: "ack.999", Key: "k3", OrderingKey: "acks:ZZ:P", Sink: "gateway"})
	rows, err := s.Claim(ctx, t0, nil, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range rows {
		got[r.EffectKey] = true
	}
	if len(rows) != 2 || !got["k1"] || !got["k2"] {
		t.Fatalf("claimed %v, want k1 and k2 (one per sink)", got)
	}
	// The gateway is down: k1 goes back to pending; the archive's row is
	// delivered regardless, and k3 still waits for k1.
	for _, r := range rows {
		if r.EffectKey == "k1" {
			s.Retry(ctx, r.ID, r.LeaseToken, t0, t0, outbox.Failure{HTTPStatus: 503, Error: "HTTP 503"})
		} else if err := Complete(ctx, s, r.ID, r.LeaseToken, t0, 200); err != nil {
			t.Fatal(err)
		}
	}
	next, _ := s.Claim(ctx, t0, nil, 10, time.Minute)
	if len(next) != 1 || next[0].EffectKey != "k1" {
		t.Errorf("after k1 failed: claimed %d rows, want k1 alone", len(next))
	}
}

// testClaimOnlyListedSinks: a claimer with a sink list never takes (and
// so never dead-letters) a row of another sink; the row stays pending for
// a replica that has the sink.
func testClaimOnlyListedSinks(t *testing.T, s store.Store) {
	ctx := context.Background()
	addEffects(t, s, "new.x12", outbox.Effect{Kind: "ack.999", Key: "n1", OrderingKey: "o", Sink: "new-sink"})
	seedPayments(t, s, 1)
	rows, err := s.Claim(ctx, t0, []string{"ledger", "acks"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Sink == "new-sink" {
			t.Errorf("claimed a row of a sink not listed")
		}
	}
	dead, _ := s.ListDead(ctx, outbox.DeadFilter{}, 10)
	if len(rows) != 2 || len(dead) != 0 {
		t.Errorf("claimed %d rows, %d dead", len(rows), len(dead))
	}
	if c := counts(t, s); c.Outbox[outbox.StatusPending] != 1 {
		t.Errorf("outbox %v, want the new sink's row pending", c.Outbox)
	}
}

// testReplayFreshAgeKeepsHistory: a replayed row's age budget starts at
// the replay; its last error and the errors of earlier lives are kept;
// response bodies are kept apart from errors.
func testReplayFreshAgeKeepsHistory(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 1)
	claim := func(at time.Time) outbox.Row {
		t.Helper()
		rows, err := s.Claim(ctx, at, []string{"ledger"}, 1, time.Minute)
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim at %s: %v %v", at, rows, err)
		}
		return rows[0]
	}
	r := claim(t0)
	if !r.AgeFrom.Equal(t0) {
		t.Errorf("age from %s, want its creation %s", r.AgeFrom, t0)
	}
	if err := s.Dead(ctx, r.ID, r.LeaseToken, t0, outbox.Failure{HTTPStatus: 400, Error: "HTTP 400 Bad Request",
		Response: `{"echo":"PATIENT"}`}); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.GetOutbox(ctx, r.ID); d.LastError != "HTTP 400 Bad Request" || d.LastResponse != `{"echo":"PATIENT"}` {
		t.Errorf("dead row: error %q response %q", d.LastError, d.LastResponse)
	}
	weekend := t0.Add(80 * time.Hour)
	for i, at := range []time.Time{weekend, weekend.Add(time.Hour)} {
		if n, err := s.Replay(ctx, outbox.DeadFilter{}, at); err != nil || n != 1 {
			t.Fatalf("replay %d: %d %v", i, n, err)
		}
		r = claim(at)
		if !r.AgeFrom.Equal(at) || r.Attempts != 1 || r.LastError == "" {
			t.Errorf("replayed row: age from %s (want %s), attempts %d, last error %q", r.AgeFrom, at, r.Attempts, r.LastError)
		}
		s.Dead(ctx, r.ID, r.LeaseToken, at, outbox.Failure{HTTPStatus: 500 + i, Error: "HTTP 50x"})
	}
	got, _ := s.GetOutbox(ctx, r.ID)
	lines := strings.Split(strings.TrimSpace(got.ErrorHistory), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "HTTP 400 Bad Request") || !strings.Contains(lines[1], "HTTP 50x") ||
		strings.Contains(got.ErrorHistory, "PATIENT") {
		t.Errorf("error history %q", got.ErrorHistory)
	}
}
