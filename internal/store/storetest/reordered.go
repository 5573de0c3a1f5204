package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// legacyEffects returns 835_canonical.x12's payment and the first claim of
// a generated 837, as process gives them.
func legacyEffects(t *testing.T) (pay, claim outbox.Effect) {
	t.Helper()
	first := func(data []byte, kind string) outbox.Effect {
		var e process.Effect
		_, err := process.File(context.Background(), bytes.NewReader(data), process.Config{NoAcks: true},
			func(it process.Item) error {
				if it.Set != nil && e.Kind == "" {
					for _, x := range it.Set.Effects {
						if x.Kind == kind {
							e = x
							break
						}
					}
				}
				return nil
			})
		if err != nil || e.Kind != kind || e.Hash == "" {
			t.Fatalf("%s effect %+v: %v", kind, e, err)
		}
		return outbox.Effect{Kind: e.Kind, Key: e.Key, OrderingKey: e.OrderingKey, Payload: e.Payload, Hash: e.Hash}
	}
	var claims bytes.Buffer
	x12gen.Claims{Sender: "RIVERSIDE", Receiver: "CLEARING", Control: 41, Claims: 1, IDPrefix: "PCN-"}.Write(&claims)
	return first(Fixture(t, "835_canonical.x12"), process.KindPayment), first(claims.Bytes(), process.KindClaim)
}

// LegacyReorderedRows are the rows the release before 0014 left after a
// route [ledger, audit] was reordered to [audit, ledger] and a payment and
// a claim were sent again under new control numbers: the first sending's
// rows (the bare key at ledger, "@audit:" at audit), and the second's new
// row at ledger, "@ledger:" and the key (audit's bare key was taken by
// ledger's row, so audit's was a business duplicate). The payment's
// second ledger row was delivered (the double delivery); the claim's is
// pending.
func LegacyReorderedRows(t *testing.T) []LegacyRow {
	t.Helper()
	pay, claim := legacyEffects(t)
	return []LegacyRow{
		{pay.Key, "ledger", outbox.StatusDelivered, pay},
		{"@audit:" + pay.Key, "audit", outbox.StatusDelivered, pay},
		{claim.Key, "ledger", outbox.StatusDelivered, claim},
		{"@audit:" + claim.Key, "audit", outbox.StatusDelivered, claim},
		{"@ledger:" + pay.Key, "ledger", outbox.StatusDelivered, pay},
		{"@ledger:" + claim.Key, "ledger", outbox.StatusPending, claim},
	}
}

// CheckReorderedUpgrade checks s, holding LegacyReorderedRows and migrated
// past 0014: the rows that keep their "@ledger:" key (ledger already has
// the bare key's row) are not taken for effects of their own. A 277CA's
// lookup of the claim (inbox.AnswerLookup.ClaimKey) names it by its effect
// key, as the release before did (it took the prefix off).
func CheckReorderedUpgrade(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	_, claim := legacyEffects(t)
	got, err := s.(inbox.AnswerLookup).ClaimKey(ctx, claim.OrderingKey)
	if err != nil {
		t.Fatal(err)
	}
	if got != claim.Key {
		t.Errorf("the claim is looked up as %q, want its effect key %q", got, claim.Key)
	}
}

// ReconciledPayer is what a driver's test gives CheckReorderedReconcile of
// reconcile's report over s (storetest cannot import reconcile, whose
// tests import it).
type ReconciledPayer struct {
	Enqueued        int
	EnqueuedAmount  x12.Money
	Delivered       int
	DeliveredAmount x12.Money
	UnknownEffects  []string
}

// CheckReorderedReconcile checks reconcile's one payer over a store
// holding LegacyReorderedRows migrated past 0014: the payment counted once,
// of its amount, and no legacy row taken for an unknown effect.
func CheckReorderedReconcile(t *testing.T, p ReconciledPayer) {
	t.Helper()
	pay, _ := legacyEffects(t)
	var amount struct {
		Amount x12.Money `json:"amount"`
	}
	if err := json.Unmarshal(pay.Payload, &amount); err != nil {
		t.Fatal(err)
	}
	if p.Enqueued != 1 || !p.EnqueuedAmount.Equal(amount.Amount) {
		t.Errorf("reconcile: the payment enqueued %d times for %s, want once for %s", p.Enqueued, p.EnqueuedAmount,
			amount.Amount)
	}
	for _, k := range p.UnknownEffects {
		if strings.HasPrefix(k, "@") {
			t.Errorf("reconcile: a legacy second row taken for an unknown effect %q", k)
		}
	}
}

// LegacyDeadTwinRows are rows the release before 0014 left when a
// payment's row at ledger (its route's first sink, the bare key) was
// dead-lettered, and the payment, sent again after the route was reordered
// to [audit, ledger], got a second row at ledger under "@ledger:", which
// was delivered: ledger has the payment.
func LegacyDeadTwinRows(t *testing.T) []LegacyRow {
	t.Helper()
	pay, _ := legacyEffects(t)
	return []LegacyRow{
		{pay.Key, "ledger", outbox.StatusDead, pay},
		{"@audit:" + pay.Key, "audit", outbox.StatusDelivered, pay},
		{"@ledger:" + pay.Key, "ledger", outbox.StatusDelivered, pay},
	}
}

// CheckDeadTwinUpgrade checks s, holding LegacyDeadTwinRows and migrated
// past 0014: ledger's dead row is a second row of the payment at a sink
// that has it delivered, so a replay of ledger's dead rows (the operator's
// routine after an outage) sends the payment to ledger no second time.
func CheckDeadTwinUpgrade(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	now := t0.Add(time.Hour)
	if _, err := s.Replay(ctx, outbox.DeadFilter{Sink: "ledger"}, now); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Claim(ctx, now.Add(time.Minute), []string{"ledger"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Errorf("row %d (%s at %s) delivered again after its effect was delivered at %s", r.ID, r.EffectKey, r.Sink, r.Sink)
	}
}

// CheckDeadTwinReconcile checks reconcile's one payer over a store holding
// LegacyDeadTwinRows migrated past 0014: the payment was delivered at both
// its sinks (ledger by its "@ledger:" row, which keeps that key; the bare
// key's dead row there discarded for it), so it counts as delivered, once,
// of its amount: else the report shows a payment delivered everywhere as
// undelivered money, for good.
func CheckDeadTwinReconcile(t *testing.T, p ReconciledPayer) {
	t.Helper()
	pay, _ := legacyEffects(t)
	var amount struct {
		Amount x12.Money `json:"amount"`
	}
	if err := json.Unmarshal(pay.Payload, &amount); err != nil {
		t.Fatal(err)
	}
	if p.Enqueued != 1 || p.Delivered != 1 || !p.DeliveredAmount.Equal(amount.Amount) {
		t.Errorf("reconcile: the payment enqueued %d times, delivered %d times for %s; want once, delivered once for %s",
			p.Enqueued, p.Delivered, p.DeliveredAmount, amount.Amount)
	}
}

// Upgrade0014 checks a driver's migration 0014 on rows the release before
// left: upgraded returns a store that held rows so and was migrated since;
// payer returns the one payer of reconcile's report over a store (the
// drivers' tests import reconcile, which this package's cannot).
func Upgrade0014(t *testing.T, upgraded func(*testing.T, []LegacyRow) store.Store,
	payer func(*testing.T, store.Store) ReconciledPayer) {
	t.Run("KeysTheOutboxByEffectAndSink", func(t *testing.T) {
		CheckMultiSinkUpgrade(t, upgraded(t, LegacyMultiSinkRows(t)))
	})
	t.Run("AfterAReorderedRouteKeepsEffectsWhole", func(t *testing.T) {
		s := upgraded(t, LegacyReorderedRows(t))
		CheckReorderedUpgrade(t, s)
		CheckReorderedReconcile(t, payer(t, s))
	})
	t.Run("DiscardsADeadRowOfAnEffectDeliveredAtItsSink", func(t *testing.T) {
		s := upgraded(t, LegacyDeadTwinRows(t))
		CheckDeadTwinUpgrade(t, s)
		CheckDeadTwinReconcile(t, payer(t, s))
	})
}
