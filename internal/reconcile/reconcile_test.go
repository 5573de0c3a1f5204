package reconcile

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// newStore returns a migrated SQLite store of its own, closed when t
// ends.
func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	for _, f := range []string{"835_canonical.x12", "835_regenerated.x12", "835_crlf.x12"} {
		if _, err := storetest.Ingest(t, st, f, storetest.Fixture(t, f)); err != nil {
			t.Fatal(err)
		}
	}
	other := bytes.Replace(storetest.Fixture(t, "835_canonical.x12"), []byte("EFT0001"), []byte("EFT0002"), 1)
	other = bytes.ReplaceAll(other, []byte("000000101"), []byte("000000301"))
	storetest.Ingest(t, st, "other.835", other)
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	since := now.Add(-24 * time.Hour)

	rep, err := Run(ctx, st, since, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergent || len(rep.Payers) != 1 {
		t.Fatalf("fresh ingest: %+v %v", rep, rep.Reasons)
	}
	p := rep.Payers[0]
	// A regenerated copy is one payment; the re-sent copy is a duplicate.
	if p.PayerID != "1512345678" || p.Parsed != 2 || p.Enqueued != 2 || !p.ParsedAmount.Equal(x12.MustMoney("300")) ||
		!p.EnqueuedAmount.Equal(p.ParsedAmount) || p.Delivered != 0 {
		t.Errorf("payer %+v", p)
	}
	// An hour and more later, undelivered rows are stuck.
	late, _ := Run(ctx, st, since, time.Hour, now.Add(2*time.Hour))
	if !late.Divergent || late.Stuck == 0 {
		t.Errorf("stuck rows not reported: %+v", late)
	}
	// A dead row and a lost outbox row are divergences.
	rows, _ := st.Claim(ctx, now, []string{"ledger"}, 1, time.Minute)
	st.Dead(ctx, rows[0].ID, rows[0].LeaseToken, now, outbox.Failure{HTTPStatus: 400, Error: "x"})
	st.DB().Exec("DELETE FROM outbox WHERE effect_key = 'payment:1512345678:EFT0002'")
	rep, _ = Run(ctx, st, since, time.Hour, now)
	if !rep.Divergent || rep.Dead != 1 || len(rep.Payers[0].MissingEffects) != 1 {
		t.Fatalf("%+v", rep)
	}
	var out bytes.Buffer
	rep.Print(&out)
	if !strings.Contains(out.String(), "1 parsed payments have no outbox row") || !strings.Contains(out.String(), "1 dead-lettered rows") {
		t.Errorf("printed:\n%s", out.String())
	}
	if rep.Files[0].Source != "test" || rep.Files[0].Status != string(inbox.FileIngested) || rep.Files[0].Files != 4 {
		t.Errorf("files %+v", rep.Files)
	}
}

// TestReconcileCountsAPaymentOnTwoSinksOnce: a payment routed to two
// sinks (two outbox rows under its effect key) is one enqueued payment of
// its amount, no unknown effect, and delivered once it is delivered at
// both sinks.
func TestReconcileCountsAPaymentOnTwoSinksOnce(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	routes := map[string][]string{"payment.posted": {"ledger", "audit"}, "claim.received": {"ledger"},
		"ack.999": {"acks"}, "ack.ta1": {"acks"}}
	data := storetest.Fixture(t, "835_canonical.x12")
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	r, err := inbox.Ingest(ctx, inbox.Options{Store: st, Routes: routes}, inbox.FileInfo{Source: "test", Path: "a.835",
		Size: int64(len(data)), MTime: now, SHA256: "sha-a", CorrelationID: "c", Now: now}, bytes.NewReader(data))
	if err != nil || len(r.Sets[0].EffectKeys) != 1 {
		t.Fatalf("%+v, %v", r, err)
	}
	for _, sink := range []string{"", "ledger", "audit"} {
		if sink != "" {
			rows, err := st.Claim(ctx, now, []string{sink}, 10, time.Minute)
			if err != nil || len(rows) != 1 {
				t.Fatalf("%s: claimed %d rows: %v", sink, len(rows), err)
			}
			if _, err := st.CompleteMany(ctx, []outbox.Completion{{ID: rows[0].ID, Token: rows[0].LeaseToken,
				HTTPStatus: 200}}, now); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := Run(ctx, st, now.Add(-time.Hour), time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Payers) != 1 {
			t.Fatalf("payers %+v", rep.Payers)
		}
		p := rep.Payers[0]
		if rep.Divergent || p.Parsed != 1 || p.Enqueued != 1 || !p.EnqueuedAmount.Equal(p.ParsedAmount) ||
			len(p.UnknownEffects) != 0 {
			t.Errorf("after %q: payer %+v, reasons %v", sink, p, rep.Reasons)
		}
		if delivered := sink == "audit"; (p.Delivered == 1) != delivered ||
			(delivered && !p.DeliveredAmount.Equal(p.ParsedAmount)) {
			t.Errorf("delivered at %q and before: payer counts %d delivered (%s)", sink, p.Delivered, p.DeliveredAmount)
		}
	}
}

// outOfOrder streams the facts of one key on either side of another's.
type outOfOrder struct{ store.Reconciler }

func (outOfOrder) ReconcileCounts(context.Context, time.Time, time.Time) (store.Facts, error) {
	return store.Facts{}, nil
}

func (outOfOrder) PaymentFacts(ctx context.Context, from, to time.Time, each func(store.PaymentFact) error) error {
	for _, key := range []string{"payment:1:B", "payment:1:A", "payment:1:B"} {
		e := &store.EnqueuedPayment{EffectKey: key, Sink: "ledger", Status: "delivered", PayerID: "1", Amount: "1.00"}
		if err := each(store.PaymentFact{Key: key, Enqueued: e}); err != nil {
			return err
		}
	}
	return nil
}

// TestRunRefusesFactsOutOfKeyOrder: the matching holds one key at a
// time, so a store that streams a key's facts apart would have them
// counted twice; reconciliation fails instead.
func TestRunRefusesFactsOutOfKeyOrder(t *testing.T) {
	now := time.Now()
	if rep, err := Run(context.Background(), outOfOrder{}, now.Add(-time.Hour), time.Hour, now); err == nil ||
		!strings.Contains(err.Error(), "out of key order") {
		t.Fatalf("facts out of order: %+v, %v", rep, err)
	}
}

// TestMalformedSummaryIsSkipped: a processed 835 whose stored summary is
// not JSON is left out of the totals, as any summary that names no
// payer; the rest of the window is reconciled.
func TestMalformedSummaryIsSkipped(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	if _, err := storetest.Ingest(t, st, "a.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`UPDATE inbox SET summary = 'not json' WHERE set_type = '835'`); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	rep, err := Run(ctx, st, now.Add(-24*time.Hour), time.Hour, now)
	if err != nil {
		t.Fatalf("a malformed summary failed the reconciliation: %v", err)
	}
	if len(rep.Payers) != 1 || rep.Payers[0].Parsed != 0 || rep.Payers[0].Enqueued != 1 {
		t.Errorf("payers %+v", rep.Payers)
	}
}
