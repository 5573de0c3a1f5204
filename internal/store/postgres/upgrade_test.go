package postgres

import (
	"context"
	"testing"

	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestUpgradeKeysTheOutboxByEffectAndSink: migration 0014 keys the outbox
// by effect key and sink; rows of an effect at further sinks, stored
// under "@SINK:" keys by the release before, are found by their effect
// key (storetest.CheckMultiSinkUpgrade), and the old unique constraint is
// gone: one effect key may have a row at each sink.
func TestUpgradeKeysTheOutboxByEffectAndSink(t *testing.T) {
	ctx := context.Background()
	s := storeMigratedBefore(t, 14)
	for _, r := range storetest.LegacyMultiSinkRows(t) {
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
	storetest.CheckMultiSinkUpgrade(t, s)
	var constraints []string
	rows, err := s.pool.Query(ctx, `SELECT conname FROM pg_constraint WHERE conrelid = 'outbox'::regclass AND contype = 'u'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		constraints = append(constraints, c)
	}
	if rows.Err() != nil || len(constraints) != 0 {
		t.Errorf("unique constraints left on the outbox: %v %v", constraints, rows.Err())
	}
}
