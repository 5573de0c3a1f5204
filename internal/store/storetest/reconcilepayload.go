package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// ReconcileReadsNoPayload: reconciliation takes a payment row's payer and
// amount from the summary of the set that enqueued it, so a day of
// payloads (several kilobytes each, unpacked) is never read. It ingests
// three payments, reads what each payload says through payloads (the
// driver's payment.posted rows: effect key to stored payload), makes every
// payment payload unreadable with corrupt, and wants the facts still, exact.
func ReconcileReadsNoPayload(t *testing.T, s store.Store, payloads func(ctx context.Context) (map[string][]byte, error),
	corrupt func(ctx context.Context) error) {
	ctx := context.Background()
	var file bytes.Buffer
	if _, err := (x12gen.Remit{Control: 7, SetsPerGroup: 3, ClaimsPerSet: 2, Trace: "R"}).Write(&file); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: Routes}, inbox.FileInfo{Source: "src",
		Path: "r.835", Size: int64(file.Len()), MTime: now, SHA256: "sha-r", CorrelationID: store.NewCorrelationID(),
		Now: now}, bytes.NewReader(file.Bytes())); err != nil {
		t.Fatal(err)
	}
	stored, err := payloads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for key, p := range stored {
		payer, amount, err := store.PaymentTotals(p)
		if err != nil || payer == "" || amount == "" {
			t.Fatalf("payload of %s: %q %q %v", key, payer, amount, err)
		}
		want[key] = payer + " " + amount
	}
	if err := corrupt(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := store.ReadFacts(ctx, s, now.Add(-time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatalf("reconcile facts read a payload: %v", err)
	}
	if len(f.Enqueued) != 3 || len(want) != 3 {
		t.Fatalf("%d payment rows, %d payloads, want 3", len(f.Enqueued), len(want))
	}
	for _, e := range f.Enqueued {
		if got := e.PayerID + " " + e.Amount; got != want[e.EffectKey] {
			t.Errorf("%s: %q, its payload says %q", e.EffectKey, got, want[e.EffectKey])
		}
	}
}
