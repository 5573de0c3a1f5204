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
	r, err := inbox.Ingest(context.Background(), storetest.Options(t, st), inbox.FileInfo{Source: "test", Path: name,
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
			if err := history.SQLite(context.Background(), st.DB(), 3000, 10, now, nil); err != nil {
				t.Fatal(err)
			}
			return st
		},
		"postgres": func(t *testing.T) store.Store {
			st := pgtest.New(t, postgres.Options{})
			if err := history.Postgres(context.Background(), st.Pool(), 3000, 10, now, nil); err != nil {
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

	windows := []time.Time{now.Add(-30 * time.Hour), at(6, 0), now.Add(-129 * time.Hour), now.Add(-238 * time.Hour),
		now.Add(-20 * 24 * time.Hour)}
	compare := func(when string) {
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
				if d > 48*time.Hour { // the window's first day and the open day
					t.Errorf("%s, since %s: read %s of payments live: %v", when, since.Format(time.RFC3339), d, rec.read)
				}
			}
		}
	}

	n, err := FoldClosed(ctx, st, now, 400*24*time.Hour, 1000)
	if err != nil || n != 399 {
		t.Fatalf("folded %d days: %v", n, err)
	}
	if n, err := FoldClosed(ctx, st, now, 400*24*time.Hour, 1000); err != nil || n != 0 {
		t.Fatalf("folded again %d days: %v", n, err)
	}
	compare("folded")

	// The bug live reading of a window had at its start: a payment
	// regenerated after the window began, enqueued before, is neither
	// parsed nor missing; the lost row enqueued again is one payment;
	// the payment lost twice is missing once.
	rep, err := Run(ctx, st, at(6, 0), time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	var acme *Payer
	for _, p := range rep.Payers {
		if p.PayerID == "1512345678" {
			acme = p
		}
	}
	if acme == nil || acme.Parsed != 2 || acme.Enqueued != 1 || fmt.Sprint(acme.MissingEffects) != "[payment:1512345678:EFT3001]" {
		t.Fatalf("payer 1512345678 since June 6: %+v", acme)
	}

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
	rows, err := st.Claim(ctx, now, []string{"ledger"}, 1000, time.Minute)
	if err != nil || len(rows) < 2 {
		t.Fatalf("claimed %d: %v", len(rows), err)
	}
	var done []outbox.Completion
	for _, r := range rows {
		done = append(done, outbox.Completion{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 200})
	}
	if _, err := st.CompleteMany(ctx, done, now); err != nil {
		t.Fatal(err)
	}
	compare("delivered")

	// Retention prunes the rollups of the days it prunes.
	if _, err := st.Prune(ctx, at(8, 6), 1000); err != nil {
		t.Fatal(err)
	}
	days, err := st.ReconcileDays(ctx, at(1, 0), at(12, 0))
	if err != nil || len(days) == 0 || days[0].Day.Before(at(8, 0)) {
		t.Fatalf("rollups after pruning before June 8: %d, first %v, %v", len(days), days[0].Day, err)
	}
}
