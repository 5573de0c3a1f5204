package sqlite

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestReconcileReadsNoPayload: reconciliation takes a payment row's payer
// and amount from the summary of the set that enqueued it, so a day of
// payloads is never read: with every payment payload made unreadable,
// the facts still come, exact.
func TestReconcileReadsNoPayload(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	var file bytes.Buffer
	if _, err := (x12gen.Remit{Control: 7, SetsPerGroup: 3, ClaimsPerSet: 2, Trace: "R"}).Write(&file); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: storetest.Routes}, inbox.FileInfo{Source: "src",
		Path: "r.835", Size: int64(file.Len()), MTime: now, SHA256: "sha-r", CorrelationID: store.NewCorrelationID(),
		Now: now}, bytes.NewReader(file.Bytes())); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	rows, err := s.db.QueryContext(ctx, `SELECT effect_key, stored_payload FROM outbox WHERE kind = 'payment.posted'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key string
		var p []byte
		if err := rows.Scan(&key, &p); err != nil {
			t.Fatal(err)
		}
		payer, amount, err := store.PaymentTotals(p)
		if err != nil || payer == "" || amount == "" {
			t.Fatalf("payload of %s: %q %q %v", key, payer, amount, err)
		}
		want[key] = payer + " " + amount
	}
	rows.Close()
	if _, err := s.db.ExecContext(ctx, `UPDATE outbox SET stored_payload = X'01FFFF' WHERE kind = 'payment.posted'`); err != nil {
		t.Fatal(err)
	}
	f, err := s.ReconcileFacts(ctx, now.Add(-time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatalf("reconcile facts read a payload: %v", err)
	}
	if len(f.Enqueued) != 3 {
		t.Fatalf("%d payment rows, want 3", len(f.Enqueued))
	}
	for _, e := range f.Enqueued {
		if got := e.PayerID + " " + e.Amount; got != want[e.EffectKey] {
			t.Errorf("%s: %q, its payload says %q", e.EffectKey, got, want[e.EffectKey])
		}
	}
}
