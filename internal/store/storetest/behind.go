package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// openAcks returns the ack.999 rows of s, by id.
func openAcks(t *testing.T, s store.Store) []outbox.Row {
	t.Helper()
	var out []outbox.Row
	for id := int64(1); id < 200; id++ {
		r, err := s.GetOutbox(context.Background(), id)
		if err == nil && r.Kind == "ack.999" {
			out = append(out, r)
		}
	}
	return out
}

// parked reports whether r waits parked behind an earlier open row of its
// key (a next attempt on 9999-12-30).
func parked(r outbox.Row) bool {
	y, m, d := r.NextAttemptAt.UTC().Date()
	return y == 9999 && m == time.December && d == 30
}

// testRowsBehindWaitParked: acknowledgments queued behind an open one of
// their partner's (one ordering key) are parked out of the claims' walk;
// when the row ahead is delivered, or dead, the next becomes due at that
// moment, and only it; a retry of the row ahead releases nothing.
func testRowsBehindWaitParked(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 4)
	acks := openAcks(t, s)
	if len(acks) != 4 || parked(acks[0]) {
		t.Fatalf("acks %d, the first parked %v", len(acks), len(acks) > 0 && parked(acks[0]))
	}
	for _, r := range acks[1:] {
		if !parked(r) {
			t.Fatalf("row %d behind row %d is due at %v, want parked", r.ID, acks[0].ID, r.NextAttemptAt)
		}
	}
	at := func(i int) outbox.Row { t.Helper(); return rowByID(t, s, acks[i].ID) }
	claimOne := func(now time.Time, want int) outbox.Row {
		t.Helper()
		rows, err := s.Claim(ctx, now, []string{"acks"}, 10, time.Minute)
		if err != nil || len(rows) != 1 || rows[0].ID != acks[want].ID {
			t.Fatalf("claim at %v: %d rows %v, want row %d alone", now, len(rows), err, acks[want].ID)
		}
		return rows[0]
	}
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	r := claimOne(t0, 0)
	if err := Complete(ctx, s, r.ID, r.LeaseToken, t1, 200); err != nil {
		t.Fatal(err)
	}
	if got := at(1); parked(got) || !got.NextAttemptAt.Equal(t1) {
		t.Errorf("after the first was delivered at %v, the second is due at %v", t1, got.NextAttemptAt)
	}
	if !parked(at(2)) || !parked(at(3)) {
		t.Error("a delivery released more than the row after it")
	}
	r = claimOne(t1, 1)
	if err := s.Dead(ctx, r.ID, r.LeaseToken, t2, outbox.Failure{HTTPStatus: 400, Error: "refused"}); err != nil {
		t.Fatal(err)
	}
	if got := at(2); parked(got) || !got.NextAttemptAt.Equal(t2) {
		t.Errorf("after the second was dead-lettered at %v, the third is due at %v", t2, got.NextAttemptAt)
	}
	r = claimOne(t2, 2)
	if err := s.Retry(ctx, r.ID, r.LeaseToken, t3, t3.Add(time.Hour), outbox.Failure{HTTPStatus: 503, Error: "later"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReapExpired(ctx, t3); err != nil {
		t.Fatal(err)
	}
	if !parked(at(3)) {
		t.Error("the fourth was released while the third, ahead of it, waits to be retried")
	}
}

// rowByID returns row id of s.
func rowByID(t *testing.T, s store.Store, id int64) outbox.Row {
	t.Helper()
	r, err := s.GetOutbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ParkedRowsAreSwept: a parked row whose predecessor left the open states
// without releasing it (on PostgreSQL, an ingest that parked it behind a
// row whose completion committed meanwhile) is made due by the next lease
// reap; leave moves row id out of the open states behind the store's back.
func ParkedRowsAreSwept(t *testing.T, s store.Store, leave func(t *testing.T, id int64)) {
	ctx := context.Background()
	seedPayments(t, s, 2)
	acks := openAcks(t, s)
	if len(acks) != 2 || !parked(acks[1]) {
		t.Fatalf("acks %+v, want two, the second parked", acks)
	}
	leave(t, acks[0].ID)
	if _, err := s.ReapExpired(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := rowByID(t, s, acks[1].ID); parked(got) || !got.NextAttemptAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("the second is due at %v after a reap at %v", got.NextAttemptAt, t0.Add(time.Minute))
	}
	rows, err := s.Claim(ctx, t0.Add(time.Minute), []string{"acks"}, 10, time.Minute)
	if err != nil || len(rows) != 1 || rows[0].ID != acks[1].ID {
		t.Errorf("claim after the sweep: %d rows %v", len(rows), err)
	}
}
