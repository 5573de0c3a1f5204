package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// attempt is the history entry of a request answered with status at at.
func attempt(at time.Time, status int, class string) *outbox.Attempt {
	a := &outbox.Attempt{At: at, Latency: 1500 * time.Microsecond, HTTPStatus: status, Class: class,
		ResponseSize: int64(status)}
	if status >= 300 || status == 0 {
		a.Error, a.Response = "HTTP error", "echo of the request"
	}
	return a
}

func attemptsOf(t *testing.T, s store.Store, id int64) []outbox.Attempt {
	t.Helper()
	got, err := s.Attempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// claimOne claims the one due ledger row at now.
func claimOne(t *testing.T, s store.Store, now time.Time) outbox.Row {
	t.Helper()
	rows, err := s.Claim(context.Background(), now, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim at %s: %d rows, %v", now, len(rows), err)
	}
	return rows[0]
}

// testAttemptsWithTransitions: Retry, Dead and CompleteMany each record
// their attempt with the row, in order, across a replay; a snooze, a
// transition without an attempt and a transition whose lease was lost
// record nothing.
func testAttemptsWithTransitions(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 1)
	r := claimOne(t, s, t0)
	if got := attemptsOf(t, s, r.ID); len(got) != 0 {
		t.Fatalf("a new row has attempts: %+v", got)
	}
	// Attempt 1: a 503, retried.
	t1 := t0.Add(time.Second)
	if err := s.Retry(ctx, r.ID, r.LeaseToken, t1, t1, outbox.Failure{HTTPStatus: 503, Error: "HTTP 503",
		Attempt: attempt(t1, 503, "5xx")}); err != nil {
		t.Fatal(err)
	}
	// A breaker snooze and a stale holder record nothing.
	r = claimOne(t, s, t1)
	if err := s.Snooze(ctx, r.ID, r.LeaseToken, t1, t1); err != nil {
		t.Fatal(err)
	}
	if err := s.Retry(ctx, r.ID, r.LeaseToken, t1, t1, outbox.Failure{Attempt: attempt(t1, 0, "network")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("retry with a stale token: %v", err)
	}
	if lost, err := s.CompleteMany(ctx, []outbox.Completion{{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 200,
		Attempt: attempt(t1, 200, "2xx")}}, t1); err != nil || len(lost) != 1 {
		t.Fatalf("complete with a stale token: lost %v, %v", lost, err)
	}
	// Attempt 2: a network failure, then a 400 dead-letters the row (attempt 3).
	r = claimOne(t, s, t1)
	t2 := t0.Add(2 * time.Second)
	if err := s.Retry(ctx, r.ID, r.LeaseToken, t2, t2, outbox.Failure{Error: "connection refused",
		Attempt: attempt(t2, 0, "network")}); err != nil {
		t.Fatal(err)
	}
	r = claimOne(t, s, t2)
	t3 := t0.Add(3 * time.Second)
	if err := s.Dead(ctx, r.ID, r.LeaseToken, t3, outbox.Failure{HTTPStatus: 400, Error: "HTTP 400",
		Attempt: attempt(t3, 400, "4xx")}); err != nil {
		t.Fatal(err)
	}
	// Replayed, it dies of age before a request (no attempt), is replayed
	// again and delivered: its history spans its lives.
	if n, err := s.Replay(ctx, outbox.DeadFilter{IDs: []int64{r.ID}}, t3); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	r = claimOne(t, s, t3)
	if err := s.Dead(ctx, r.ID, r.LeaseToken, t3, outbox.Failure{HTTPStatus: 400, Error: "max_age exceeded"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Replay(ctx, outbox.DeadFilter{IDs: []int64{r.ID}}, t3); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	r = claimOne(t, s, t3)
	t4 := t0.Add(4 * time.Second)
	if lost, err := s.CompleteMany(ctx, []outbox.Completion{{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 204,
		Attempt: attempt(t4, 204, "2xx")}}, t4); err != nil || len(lost) != 0 {
		t.Fatalf("complete: lost %v, %v", lost, err)
	}
	got := attemptsOf(t, s, r.ID)
	want := []struct {
		seq, number, status int
		class               string
		at                  time.Time
	}{{1, 1, 503, "5xx", t1}, {2, 2, 0, "network", t2}, {3, 3, 400, "4xx", t3}, {4, 1, 204, "2xx", t4}}
	if len(got) != len(want) {
		t.Fatalf("history: %+v, want %d attempts", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Seq != w.seq || g.Number != w.number || g.HTTPStatus != w.status || g.Class != w.class || !g.At.Equal(w.at) ||
			g.Latency != 1500*time.Microsecond || g.ResponseSize != int64(w.status) {
			t.Errorf("attempt %d: %+v, want %+v", i+1, g, w)
		}
	}
	if got[0].Error != "HTTP error" || got[0].Response != "echo of the request" || got[3].Error != "" || got[3].Response != "" {
		t.Errorf("error and response: %+v", got)
	}
}

// testAttemptsCompleteManyBatch: one CompleteMany records the attempt of
// each row it delivers, none for a row whose lease was lost, and none for
// a completion without an attempt.
func testAttemptsCompleteManyBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 3)
	rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 3 {
		t.Fatalf("claim: %d %v", len(rows), err)
	}
	lost, err := s.CompleteMany(ctx, []outbox.Completion{
		{ID: rows[0].ID, Token: rows[0].LeaseToken, HTTPStatus: 200, Attempt: attempt(t0, 200, "2xx")},
		{ID: rows[1].ID, Token: "stale", HTTPStatus: 201, Attempt: attempt(t0, 201, "2xx")},
		{ID: rows[2].ID, Token: rows[2].LeaseToken, HTTPStatus: 202},
	}, t0)
	if err != nil || len(lost) != 1 || lost[0] != rows[1].ID {
		t.Fatalf("complete: lost %v, %v", lost, err)
	}
	if got := attemptsOf(t, s, rows[0].ID); len(got) != 1 || got[0].HTTPStatus != 200 || got[0].Seq != 1 || got[0].Number != 1 {
		t.Errorf("delivered row: %+v", got)
	}
	if got := attemptsOf(t, s, rows[1].ID); len(got) != 0 {
		t.Errorf("a row whose lease was lost has attempts: %+v", got)
	}
	if got := attemptsOf(t, s, rows[2].ID); len(got) != 0 {
		t.Errorf("a completion without an attempt recorded one: %+v", got)
	}
}

// testAttemptsBounded: a row keeps its last outbox.AttemptsKept attempts.
func testAttemptsBounded(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 1)
	total := outbox.AttemptsKept + 7
	var id int64
	for i := 1; i <= total; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		r := claimOne(t, s, at)
		id = r.ID
		if err := s.Retry(ctx, r.ID, r.LeaseToken, at, at, outbox.Failure{HTTPStatus: 500,
			Attempt: attempt(at, 500, "5xx")}); err != nil {
			t.Fatal(err)
		}
	}
	got := attemptsOf(t, s, id)
	if len(got) != outbox.AttemptsKept || got[0].Seq != total-outbox.AttemptsKept+1 || got[len(got)-1].Seq != total ||
		got[len(got)-1].Number != total {
		t.Fatalf("%d attempts kept, from %d to %d; want the last %d of %d", len(got), got[0].Seq, got[len(got)-1].Seq,
			outbox.AttemptsKept, total)
	}
}

// testAttemptsPrunedWithRow: pruning a delivered row deletes its attempts;
// a dead row keeps them.
func testAttemptsPrunedWithRow(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 2)
	rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d %v", len(rows), err)
	}
	done, dead := rows[0], rows[1]
	if _, err := s.CompleteMany(ctx, []outbox.Completion{{ID: done.ID, Token: done.LeaseToken, HTTPStatus: 200,
		Attempt: attempt(t0, 200, "2xx")}}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Dead(ctx, dead.ID, dead.LeaseToken, t0, outbox.Failure{HTTPStatus: 400,
		Attempt: attempt(t0, 400, "4xx")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, t0.Add(time.Second), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetOutbox(ctx, done.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the delivered row was not pruned: %v", err)
	}
	if got := attemptsOf(t, s, done.ID); len(got) != 0 {
		t.Errorf("a pruned row's attempts stayed: %+v", got)
	}
	if got := attemptsOf(t, s, dead.ID); len(got) != 1 {
		t.Errorf("a dead row's attempts: %+v", got)
	}
}
