package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/reconcile"

	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestUpgradeAfterAReorderedRouteKeepsEffectsWhole: the rows migration 0014
// leaves under their "@SINK:" key (a second row of an effect at a sink
// that has its bare key's row) are no effects of their own: a 277CA's
// claim lookup and reconcile name the effect by its key
// (storetest.CheckReorderedUpgrade).
func TestUpgradeAfterAReorderedRouteKeepsEffectsWhole(t *testing.T) {
	s := upgradedWith(t, storetest.LegacyReorderedRows(t))
	storetest.CheckReorderedUpgrade(t, s)
	storetest.CheckReorderedReconcile(t, reconciledPayer(t, s))
}

// reconciledPayer returns the one payer of reconcile's report over s.
func reconciledPayer(t *testing.T, s *Store) storetest.ReconciledPayer {
	t.Helper()
	rep, err := reconcile.Run(context.Background(), s, time.Unix(0, 0), 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Payers) != 1 {
		t.Fatalf("payers %+v", rep.Payers)
	}
	p := rep.Payers[0]
	return storetest.ReconciledPayer{Enqueued: p.Enqueued, EnqueuedAmount: p.EnqueuedAmount, Delivered: p.Delivered,
		DeliveredAmount: p.DeliveredAmount, UnknownEffects: p.UnknownEffects}
}

// TestUpgradeDiscardsADeadRowOfAnEffectDeliveredAtItsSink: a sink's dead
// row of a payment whose "@SINK:" twin at that sink was delivered is not
// sent again by a replay after migration 0014, and the payment reconciles
// as delivered (storetest.CheckDeadTwinUpgrade, CheckDeadTwinReconcile).
func TestUpgradeDiscardsADeadRowOfAnEffectDeliveredAtItsSink(t *testing.T) {
	s := upgradedWith(t, storetest.LegacyDeadTwinRows(t))
	storetest.CheckDeadTwinUpgrade(t, s)
	storetest.CheckDeadTwinReconcile(t, reconciledPayer(t, s))
}
