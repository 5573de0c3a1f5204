package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/history"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// ranges records the windows of payments a reconciliation reads live.
type ranges struct {
	store.Reconciler
	now  time.Time // the end of a window that has none
	mu   sync.Mutex
	read []time.Duration
}

func (r *ranges) PaymentFacts(ctx context.Context, from, to time.Time, each func(store.PaymentFact) error) error {
	end := to
	if end.Equal(store.EndOfTime) {
		end = r.now
	}
	r.mu.Lock()
	r.read = append(r.read, end.Sub(from))
	r.mu.Unlock()
	return r.Reconciler.PaymentFacts(ctx, from, to, each)
}

// era is the canonical 835 paying under trace with control number n:
// another interchange, the same payment as every era of the same trace.
func era(t *testing.T, trace string, n int) []byte {
	b := storetest.Fixture(t, "835_canonical.x12")
	b = bytes.ReplaceAll(b, []byte("EFT0001"), []byte(trace))
	b = bytes.ReplaceAll(b, []byte("000000101"), fmt.Appendf(nil, "%09d", n))
	b = bytes.ReplaceAll(b, []byte("*101*X*"), fmt.Appendf(nil, "*%d*X*", n))
	return bytes.ReplaceAll(b, []byte("GE*1*101~"), fmt.Appendf(nil, "GE*1*%d~", n))
}

func ingestAt(t *testing.T, st store.Store, name string, data []byte, at time.Time) *inbox.Report {
	t.Helper()
	return ingestRouted(t, st, storetest.Options(t, st), name, data, at)
}

func ingestRouted(t *testing.T, st store.Store, o inbox.Options, name string, data []byte, at time.Time) *inbox.Report {
	t.Helper()
	r, err := inbox.Ingest(context.Background(), o, inbox.FileInfo{Source: "test", Path: name,
		Size: int64(len(data)), MTime: at, SHA256: "sha-" + name, CorrelationID: store.NewCorrelationID(), Now: at},
		bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ingest %s: %v", name, err)
	}
	return r
}

// TestDayRollupsMatchLive: reconciliation read from day rollups and the
// live rows of the days not folded reports what reading every row of the
// window reports, on both drivers, for windows that start mid-day, at
// midnight and before the first folded day; after the rollups were
// folded, dead rows of their days replayed, delivered and discarded; with
// a payment regenerated a day later, a lost row enqueued again by a later
// document, and a payment missing on two days. It reads no more than the
// open days live.
func TestDayRollupsMatchLive(t *testing.T) {
	now := time.Date(2026, 6, 11, 12, 0, 0, 0, time.UTC)
	stores := map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			st := newStore(t)
			if err := history.SQLite(context.Background(), st.DB(), 1000, 10, now, nil); err != nil {
				t.Fatal(err)
			}
			return st
		},
		"postgres": func(t *testing.T) store.Store {
			st := pgtest.New(t, postgres.Options{})
			if err := history.Postgres(context.Background(), st.Pool(), 1000, 10, now, nil); err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			testDayRollupsMatchLive(t, open(t), now)
		})
	}
}

func testDayRollupsMatchLive(t *testing.T, st store.Store, now time.Time) {
	ctx := context.Background()
	at := func(day, hour int) time.Time { return time.Date(2026, 6, day, hour, 0, 0, 0, time.UTC) }
	lose := func(trace string) { // a lost row, as TestReconcile loses one
		t.Helper()
		key := "payment:1512345678:" + trace
		var err error
		switch s := st.(type) {
		case *sqlite.Store:
			_, err = s.DB().Exec(`DELETE FROM outbox WHERE effect_key = ?`, key)
		case *postgres.Store:
			_, err = s.Pool().Exec(ctx, `DELETE FROM outbox WHERE effect_key = $1`, key)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Regenerated a day later: one payment.
	ingestAt(t, st, "a1.835", era(t, "EFT1001", 1001), at(5, 10))
	if r := ingestAt(t, st, "a2.835", era(t, "EFT1001", 1002), at(6, 9)); r.Sets[0].Outcome != inbox.BusinessDuplicate {
		t.Fatalf("regenerated era: %s", r.Sets[0].Outcome)
	}
	// Its row lost, then enqueued again by a regenerated document.
	ingestAt(t, st, "b1.835", era(t, "EFT2001", 2001), at(7, 8))
	lose("EFT2001")
	ingestAt(t, st, "b2.835", era(t, "EFT2001", 2002), at(8, 8))
	// Lost on two days: one missing payment.
	ingestAt(t, st, "c1.835", era(t, "EFT3001", 3001), at(7, 9))
	lose("EFT3001")
	ingestAt(t, st, "c2.835", era(t, "EFT3001", 3002), at(8, 9))
	lose("EFT3001")
	// Regenerated after its route gained a sink: one payment with rows
	// made on two days, delivered when both are.
	ingestAt(t, st, "d1.835", era(t, "EFT4001", 4001), at(5, 11))
	twoSinks := storetest.Options(t, st)
	twoSinks.Routes = map[string][]string{"payment.posted": {"ledger", "audit"}, "claim.received": {"ledger"},
		"ack.999": {"acks"}, "ack.ta1": {"acks"}}
	if r := ingestRouted(t, st, twoSinks, "d2.835", era(t, "EFT4001", 4002), at(7, 11)); len(r.Sets[0].EffectKeys) != 1 {
		t.Fatalf("regenerated era for a new sink: %+v", r.Sets[0])
	}
	deliver := func(sink string) { // every due row of sink
		t.Helper()
		rows, err := st.Claim(ctx, now, []string{sink}, 1000, time.Minute)
		if err != nil || len(rows) == 0 {
			t.Fatalf("claimed %d at %s: %v", len(rows), sink, err)
		}
		var done []outbox.Completion
		for _, r := range rows {
			done = append(done, outbox.Completion{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 200})
		}
		if _, err := st.CompleteMany(ctx, done, now); err != nil {
			t.Fatal(err)
		}
	}

	// Windows that start at midnight, mid-day, and before the first
	// folded day.
	windows := []time.Time{at(6, 0), now.Add(-238 * time.Hour), now.Add(-20 * 24 * time.Hour)}
	const keep = 20 * 24 * time.Hour // retention.keys: the folds start May 23
	// compare compares reports from rollups and from rows, and that the
	// former read no more than the window's first day, the open day and
	// unfolded more days live.
	compare := func(when string, unfolded ...time.Time) {
		t.Helper()
		for _, since := range windows {
			want, err := Run(ctx, FromRows(st), since, time.Hour, now)
			if err != nil {
				t.Fatal(err)
			}
			rec := &ranges{Reconciler: st, now: now}
			got, err := Run(ctx, rec, since, time.Hour, now)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := json.MarshalIndent(want, "", " ")
			g, _ := json.MarshalIndent(got, "", " ")
			if !bytes.Equal(w, g) {
				t.Fatalf("%s, since %s: rolled up\n%s\nread live\n%s", when, since.Format(time.RFC3339), g, w)
			}
			for _, d := range rec.read {
				if d > time.Duration(2+len(unfolded))*24*time.Hour {
					t.Errorf("%s, since %s: read %s of payments live: %v", when, since.Format(time.RFC3339), d, rec.read)
				}
			}
		}
	}

	n, err := FoldClosed(ctx, st, now, keep, 1000)
	if err != nil || n != 19 { // May 23 to June 10
		t.Fatalf("folded %d days: %v", n, err)
	}
	// The two days that closed less than Settle ago are folded again at
	// every pass; the others are settled.
	if n, err := FoldClosed(ctx, st, now, keep, 1000); err != nil || n != 2 {
		t.Fatalf("folded again %d days: %v", n, err)
	}
	compare("folded")
	payer := func(since time.Time) *Payer {
		t.Helper()
		rep, err := Run(ctx, st, since, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rep.Payers {
			if p.PayerID == "1512345678" {
				return p
			}
		}
		t.Fatalf("no payer 1512345678 since %s", since)
		return nil
	}
	// A payment regenerated after the window began, enqueued before, is
	// neither parsed nor missing, nor is one whose row for a new sink was
	// made in the window; the lost row enqueued again is one payment; the
	// payment lost twice is missing once.
	if p := payer(at(6, 0)); p.Parsed != 2 || p.Enqueued != 1 ||
		fmt.Sprint(p.MissingEffects) != "[payment:1512345678:EFT3001]" || len(p.UnknownEffects) != 0 {
		t.Fatalf("payer 1512345678 since June 6: %+v", p)
	}
	// From June 5: EFT1001 and EFT4001 too, EFT4001 undelivered until
	// its row at the new sink is.
	if p := payer(at(5, 0)); p.Parsed != 4 || p.Enqueued != 3 || p.Delivered != 0 {
		t.Fatalf("payer 1512345678 since June 5: %+v", p)
	}
	deliver("ledger")
	if p := payer(at(5, 0)); p.Delivered != 2 {
		t.Fatalf("payer 1512345678 since June 5, delivered at ledger: %+v", p)
	}
	deliver("audit")
	if p := payer(at(5, 0)); p.Delivered != 3 {
		t.Fatalf("payer 1512345678 since June 5, delivered at both: %+v", p)
	}
	compare("delivered at both sinks")

	// A day with no rollup and one of an older format between rolled
	// days are read live.
	june7, june8 := at(7, 0), at(8, 0)
	days, err := st.ReconcileDays(ctx, june7, at(9, 0))
	if err != nil || len(days) != 2 {
		t.Fatalf("rollups of June 7 and 8: %d, %v", len(days), err)
	}
	deleteDay(t, st, june7)
	deleteDay(t, st, june8)
	if err := st.PutReconcileDay(ctx, store.ReconcileDay{Day: june8, Version: 0, Body: days[1].Body, FoldedAt: now}); err != nil {
		t.Fatal(err)
	}
	compare("a day unfolded, one of an older format", june7, june8)
	// A rollup of an older format does not replace a later one.
	if err := st.PutReconcileDay(ctx, store.ReconcileDay{Day: june8, Version: DayVersion, Body: []byte("{}"), FoldedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutReconcileDay(ctx, store.ReconcileDay{Day: june8, Version: 0, Body: days[1].Body, FoldedAt: now}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.ReconcileDays(ctx, june8, at(9, 0)); err != nil || len(got) != 1 || got[0].Version != DayVersion {
		t.Fatalf("rollup of June 8 after an older one was put: %+v, %v", got, err)
	}
	deleteDay(t, st, june8)
	if n, err := FoldClosed(ctx, st, now, keep, 1000); err != nil || n != 4 {
		t.Fatalf("folded %d days (June 7, 8 and the two unsettled): %v", n, err)
	}

	// A payment committed into a folded day after its fold, as by a
	// poller whose clock is behind: counted once the day is folded again
	// (it closed less than Settle ago).
	ingestAt(t, st, "e1.835", era(t, "EFT5001", 5001), at(10, 22))
	if p := payer(at(5, 0)); p.Enqueued != 3 {
		t.Fatalf("a payment committed after its day was folded counted before its fold: %+v", p)
	}
	if n, err := FoldClosed(ctx, st, now, keep, 1000); err != nil || n != 2 {
		t.Fatalf("folded %d days: %v", n, err)
	}
	if p := payer(at(5, 0)); p.Enqueued != 4 {
		t.Fatalf("a payment committed after its day was folded, folded again: %+v", p)
	}
	compare("a late payment folded")

	// Delivery after the fold: dead rows of folded days replayed, some
	// delivered, one discarded.
	dead, err := st.ListDeadBrief(ctx, outbox.DeadFilter{Kind: "payment.posted", Until: at(10, 0)}, 5)
	if err != nil || len(dead) < 3 {
		t.Fatalf("%d dead payments in folded days: %v", len(dead), err)
	}
	if n, err := st.Discard(ctx, outbox.DeadFilter{IDs: []int64{dead[0].ID}}, now); err != nil || n != 1 {
		t.Fatalf("discarded %d: %v", n, err)
	}
	if n, err := st.Replay(ctx, outbox.DeadFilter{IDs: []int64{dead[1].ID, dead[2].ID}}, now); err != nil || n != 2 {
		t.Fatalf("replayed %d: %v", n, err)
	}
	compare("replayed")
	deliver("ledger")
	compare("replayed and delivered")

	// Retention prunes the rollups of the days it prunes.
	if _, err := st.Prune(ctx, at(8, 6), 1000); err != nil {
		t.Fatal(err)
	}
	days, err = st.ReconcileDays(ctx, at(1, 0), at(12, 0))
	if err != nil || len(days) != 3 || !days[0].Day.Equal(june8) {
		t.Fatalf("rollups after pruning before June 8, 06:00: %+v, %v", days, err)
	}
}

// deleteDay deletes a day's rollup, as a store that never folded it.
func deleteDay(t *testing.T, st store.Store, day time.Time) {
	t.Helper()
	var err error
	switch s := st.(type) {
	case *sqlite.Store:
		_, err = s.DB().Exec(`DELETE FROM reconcile_day WHERE day = ?`, day.Format(time.DateOnly))
	case *postgres.Store:
		_, err = s.Pool().Exec(context.Background(), `DELETE FROM reconcile_day WHERE day = $1`, day)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// racing is a store where a payment of a new payer was committed, still
// to deliver, after the stretch holding it was read and before the rows
// still to deliver were.
type racing struct{ store.Reconciler }

func (r racing) UndeliveredPayments(ctx context.Context, from, to time.Time, each func(store.PaymentFact) error) error {
	if err := r.Reconciler.UndeliveredPayments(ctx, from, to, each); err != nil {
		return err
	}
	return each(store.PaymentFact{Key: "payment:NEW:1", Enqueued: &store.EnqueuedPayment{EffectKey: "payment:NEW:1",
		Sink: "ledger", Status: "pending", PayerID: "NEW", Amount: "5.00"}})
}

// TestAPaymentCommittedDuringTheReadIsNotTakenFromDelivered: a payment
// the reconciliation did not count is not taken from a payer's delivered
// payments, nor makes a payer of its own with less than none delivered.
func TestAPaymentCommittedDuringTheReadIsNotTakenFromDelivered(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	ingestAt(t, st, "a.835", era(t, "EFT9001", 9001), now.Add(-time.Hour))
	rep, err := Run(ctx, racing{st}, now.Add(-24*time.Hour), time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Payers {
		if p.PayerID == "NEW" || p.Delivered < 0 || p.Delivered > p.Enqueued {
			t.Errorf("payer %+v", p)
		}
	}
	if len(rep.Payers) != 1 || rep.Payers[0].Enqueued != 1 || rep.Payers[0].Delivered != 0 {
		t.Errorf("payers %+v", rep.Payers)
	}
}
