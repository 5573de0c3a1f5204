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
	ctx := context.Background()
	s := storeMigratedBefore(t, 14)
	for _, r := range storetest.LegacyReorderedRows(t) {
		if _, err := s.pool.Exec(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id,
			payload_packed, status, next_attempt_at, created_at, updated_at, effect_hash)
			VALUES ($1, $2, $3, $4, 'c', $5, $6, $7, $7, $7, $8)`, r.Key, r.Effect.Kind, r.Sink, r.Effect.OrderingKey,
			r.Effect.StoredPayload(), r.Status, t0, r.Effect.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckReorderedUpgrade(t, s)
	rep, err := reconcile.Run(ctx, s, time.Unix(0, 0), 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Payers) != 1 {
		t.Fatalf("payers %+v", rep.Payers)
	}
	p := rep.Payers[0]
	storetest.CheckReorderedReconcile(t, storetest.ReconciledPayer{Enqueued: p.Enqueued, EnqueuedAmount: p.EnqueuedAmount,
		UnknownEffects: p.UnknownEffects})
}

// TestUpgradeDiscardsADeadRowOfAnEffectDeliveredAtItsSink: a sink's dead
// row of a payment whose "@SINK:" twin at that sink was delivered is not
// sent again by a replay after migration 0014
// (storetest.CheckDeadTwinUpgrade).
func TestUpgradeDiscardsADeadRowOfAnEffectDeliveredAtItsSink(t *testing.T) {
	ctx := context.Background()
	s := storeMigratedBefore(t, 14)
	for _, r := range storetest.LegacyDeadTwinRows(t) {
		if _, err := s.pool.Exec(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id,
			payload_packed, status, next_attempt_at, created_at, updated_at, effect_hash)
			VALUES ($1, $2, $3, $4, 'c', $5, $6, $7, $7, $7, $8)`, r.Key, r.Effect.Kind, r.Sink, r.Effect.OrderingKey,
			r.Effect.StoredPayload(), r.Status, t0, r.Effect.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckDeadTwinUpgrade(t, s)
}
