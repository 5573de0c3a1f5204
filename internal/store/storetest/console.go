package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testPollStatusPerDirectory: a poll's end is recorded per source and
// directory: nothing before the first; the last poll and its holder; a
// success moves last_ok; a failure counts on its UTC day and keeps its
// message after later successes; a new day's first poll counts afresh.
func testPollStatusPerDirectory(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got, err := s.PollStatuses(ctx); err != nil || len(got) != 0 {
		t.Fatalf("never polled: %+v %v", got, err)
	}
	rec := func(dir, holder string, at time.Time, msg string) {
		t.Helper()
		if err := s.RecordPoll(ctx, "acme", dir, holder, inbox.Fence{}, at, msg); err != nil {
			t.Fatal(err)
		}
	}
	get := func() []store.PollStatus { t.Helper(); return pollStatuses(t, s) }
	rec("/out", "host-a", t0, "")
	rec("/out", "host-a", t0.Add(time.Minute), "list: connection reset by peer")
	rec("/out", "host-b", t0.Add(2*time.Minute), "lease: context deadline exceeded")
	rec("/out", "host-b", t0.Add(3*time.Minute), "")
	rec("/in", "host-a", t0.Add(time.Minute), "list: permission denied")
	got := get()
	if len(got) != 2 || got[0].Directory != "/in" || got[1].Directory != "/out" {
		t.Fatalf("statuses %+v", got)
	}
	in, out := got[0], got[1]
	if out.Source != "acme" || out.Holder != "host-b" || !out.LastPollAt.Equal(t0.Add(3*time.Minute)) ||
		!out.LastOKAt.Equal(t0.Add(3*time.Minute)) || out.LastError != "lease: context deadline exceeded" ||
		!out.LastErrorAt.Equal(t0.Add(2*time.Minute)) || out.ErrorsToday(t0) != 2 {
		t.Errorf("/out %+v", out)
	}
	if !in.LastOKAt.IsZero() || in.LastError != "list: permission denied" || in.ErrorsToday(t0) != 1 ||
		!in.LastPollAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("/in %+v", in)
	}
	if n := out.ErrorsToday(t0.Add(24 * time.Hour)); n != 0 {
		t.Errorf("yesterday's errors counted today: %d", n)
	}
	// The next day: the count starts again; the last error stays.
	next := t0.Add(24 * time.Hour)
	rec("/out", "host-b", next, "")
	if out = get()[1]; out.ErrorsToday(next) != 0 || out.LastError != "lease: context deadline exceeded" {
		t.Errorf("next day, success: %+v", out)
	}
	rec("/out", "host-b", next.Add(time.Minute), "list: EOF")
	if out = get()[1]; out.ErrorsToday(next) != 1 || out.LastError != "list: EOF" || !out.LastOKAt.Equal(next) {
		t.Errorf("next day, failure: %+v", out)
	}
}

// testAttemptStatsPerSink: the console's delivery statistics count each
// sink's attempts since the time asked, those answered 2xx, and their
// latency at the 50th and 95th percentiles (nearest rank), in one reading
// for every sink.
func testAttemptStatsPerSink(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 2) // two ledger rows, two acks rows
	n := 0
	try := func(sink string, at time.Time, status int, latency time.Duration) {
		t.Helper()
		n++
		claimAt := t0.Add(time.Duration(n) * time.Second)
		rows, err := s.Claim(ctx, claimAt, []string{sink}, 1, time.Minute)
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim %s: %d rows, %v", sink, len(rows), err)
		}
		a := &outbox.Attempt{At: at, Latency: latency, HTTPStatus: status, Class: "5xx"}
		if status/100 == 2 {
			a.Class = "2xx"
			if lost, err := s.CompleteMany(ctx, []outbox.Completion{{ID: rows[0].ID, Token: rows[0].LeaseToken,
				HTTPStatus: status, Attempt: a}}, claimAt); err != nil || len(lost) != 0 {
				t.Fatalf("complete: %v %v", lost, err)
			}
			return
		}
		if status == 0 {
			a.Class = "network"
		}
		if err := s.Retry(ctx, rows[0].ID, rows[0].LeaseToken, claimAt, claimAt, outbox.Failure{HTTPStatus: status,
			Error: "failed", Attempt: a}); err != nil {
			t.Fatal(err)
		}
	}
	try("ledger", t0.Add(-2*time.Hour), 503, 10*time.Millisecond) // before the window
	try("ledger", t0.Add(time.Second), 0, 20*time.Millisecond)
	try("ledger", t0.Add(2*time.Second), 200, 40*time.Millisecond)
	try("ledger", t0.Add(3*time.Second), 204, 30*time.Millisecond)
	try("acks", t0.Add(4*time.Second), 202, 5*time.Millisecond)
	got, err := s.AttemptStats(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.AttemptStats{
		{Sink: "acks", Attempts: 1, OK: 1, P50: 5 * time.Millisecond, P95: 5 * time.Millisecond},
		{Sink: "ledger", Attempts: 3, OK: 2, P50: 30 * time.Millisecond, P95: 40 * time.Millisecond},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("since t0: %+v, want %+v", got, want)
	}
	got, err = s.AttemptStats(ctx, t0.Add(-3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1] != (store.AttemptStats{Sink: "ledger", Attempts: 4, OK: 2, P50: 20 * time.Millisecond,
		P95: 40 * time.Millisecond}) {
		t.Errorf("since t0-3h: %+v", got)
	}
	if got, err := s.AttemptStats(ctx, t0.Add(time.Hour)); err != nil || len(got) != 0 {
		t.Errorf("no attempts since: %+v %v", got, err)
	}
}

// testFileOutcomesPerArrival: the files list's sets by outcome are each
// asked arrival's inbox rows by status and sightings by kind, in one
// reading; an arrival with none is absent.
func testFileOutcomesPerArrival(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingestAs(t, s, "in/a.835", "corr-a", t0, Fixture(t, "835_canonical.x12"))
	ingestAs(t, s, "in/b.835", "corr-b", t0.Add(time.Minute), Fixture(t, "835_canonical.x12"))
	ingestAs(t, s, "in/c.835", "corr-c", t0.Add(2*time.Minute), Fixture(t, "835_changed_content.x12"))
	// A set whose SE01 count is wrong, under its own control numbers.
	bad := bytes.ReplaceAll(Fixture(t, "err_se01_count.x12"), []byte("000000101"), []byte("000000777"))
	ingestAs(t, s, "in/d.x12", "corr-d", t0.Add(3*time.Minute), bytes.Replace(bad, []byte("*101*X*"), []byte("*777*X*"), 1))
	got, err := s.FileOutcomes(ctx, []string{"corr-a", "corr-b", "corr-c", "corr-d", "corr-none"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{"corr-a": {"processed": 1}, "corr-b": {"duplicate": 1}, "corr-c": {"conflict": 1},
		"corr-d": {"rejected": 1}}
	if len(got) != len(want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	for id, w := range want {
		if len(got[id]) != len(w) {
			t.Errorf("%s: %v, want %v", id, got[id], w)
		}
		for k, n := range w {
			if got[id][k] != n {
				t.Errorf("%s: %v, want %v", id, got[id], w)
			}
		}
	}
	if got, err := s.FileOutcomes(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("no ids: %v %v", got, err)
	}
}

// testSessionRevocation: a revoked console session stays revoked
// (revoking again is harmless) until it would have expired, when the next
// revocation forgets it; another session is untouched.
func testSessionRevocation(t *testing.T, s store.Store) {
	ctx := context.Background()
	revoked := func(id string) bool {
		t.Helper()
		r, err := s.SessionRevoked(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for range 2 {
		if err := s.RevokeSession(ctx, "s1", t0.Add(time.Hour), t0); err != nil {
			t.Fatal(err)
		}
	}
	if !revoked("s1") || revoked("s2") {
		t.Fatalf("s1 %t, s2 %t", revoked("s1"), revoked("s2"))
	}
	if err := s.RevokeSession(ctx, "s3", t0.Add(3*time.Hour), t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if revoked("s1") || !revoked("s3") {
		t.Errorf("after s1 expired: s1 %t, s3 %t", revoked("s1"), revoked("s3"))
	}
}

// testPollStatusFencedByLease: a poll's end is recorded only under the
// directory lease's current token: once another replica has taken the
// lease over (its token bumped), the old holder's late record is refused
// and the new holder's status stands; a lease never granted fences out
// everything.
func testPollStatusFencedByLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	const lease = "poll:acme:/out"
	acquire := func(holder string, ttl time.Duration) inbox.Fence {
		t.Helper()
		token, ok, err := s.AcquireLease(ctx, lease, holder, ttl, time.Now().UTC())
		if err != nil || !ok {
			t.Fatalf("lease for %s: %v %v", holder, ok, err)
		}
		return inbox.Fence{Name: lease, Token: token}
	}
	rec := func(holder string, f inbox.Fence, at time.Time, msg string) {
		t.Helper()
		if err := s.RecordPoll(ctx, "acme", "/out", holder, f, at, msg); err != nil {
			t.Fatal(err)
		}
	}
	get := func() []store.PollStatus { t.Helper(); return pollStatuses(t, s) }
	rec("host-a", inbox.Fence{Name: lease, Token: 1}, t0, "") // no lease granted yet
	if got := get(); len(got) != 0 {
		t.Fatalf("recorded without the lease: %+v", got)
	}
	a := acquire("host-a", time.Hour)
	rec("host-a", a, t0, "")
	// host-a stalls past its lease; host-b takes the directory over.
	acquire("host-a", -time.Hour)
	b := acquire("host-b", time.Hour)
	if b.Token == a.Token {
		t.Fatalf("takeover kept token %d", a.Token)
	}
	rec("host-b", b, t0.Add(2*time.Minute), "")
	rec("host-a", a, t0.Add(3*time.Minute), "directory lease lost: "+lease)
	got := get()
	if len(got) != 1 || got[0].Holder != "host-b" || !got[0].LastPollAt.Equal(t0.Add(2*time.Minute)) ||
		got[0].LastError != "" || got[0].ErrorsToday(t0) != 0 {
		t.Errorf("the old holder's late record was taken: %+v", got)
	}
	rec("host-b", b, t0.Add(4*time.Minute), "list: EOF")
	if got := get(); len(got) != 1 || got[0].LastError != "list: EOF" || got[0].ErrorsToday(t0) != 1 {
		t.Errorf("the holder's record was refused: %+v", got)
	}
}

// pollStatuses returns s's poll statuses, failing t on an error.
func pollStatuses(t *testing.T, s store.Store) []store.PollStatus {
	t.Helper()
	got, err := s.PollStatuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}
