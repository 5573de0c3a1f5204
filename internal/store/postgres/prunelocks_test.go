package postgres

import (
	"context"
	"testing"
	"time"
)

// TestPrunePayloadsDeletesLocksUntouchedSince: the ordering and
// effect-key locks untouched since retention.payloads' cutoff go with the
// payloads, batch by batch, and the newer stay. Each payment has an
// ordering key of its own, so locks kept as long as keys were a row a
// payment for a year.
func TestPrunePayloadsDeletesLocksUntouchedSince(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	cutoff := time.Now().UTC().Add(-30 * 24 * time.Hour)
	for _, q := range []string{
		`INSERT INTO outbox_order (sink, ordering_key, touched_at)
		 SELECT 'ledger', 'payment:' || g, $1::timestamptz - g * interval '1 minute' FROM generate_series(1, 5) g`,
		`INSERT INTO outbox_order (sink, ordering_key, touched_at) VALUES ('ledger', 'payment:new', $1::timestamptz + interval '1 minute')`,
		`INSERT INTO outbox_effect_lock (effect_key, touched_at)
		 SELECT 'payment:' || g, $1::timestamptz - g * interval '1 minute' FROM generate_series(1, 3) g`,
		`INSERT INTO outbox_effect_lock (effect_key, touched_at) VALUES ('payment:new', $1::timestamptz + interval '1 minute')`,
	} {
		if _, err := s.pool.Exec(ctx, q, cutoff); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PrunePayloads(ctx, cutoff, 2); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"outbox_order", "outbox_effect_lock"} {
		var n int
		var newest string
		col := "ordering_key"
		if table == "outbox_effect_lock" {
			col = "effect_key"
		}
		if err := s.pool.QueryRow(ctx, `SELECT count(*), max(`+col+`) FROM `+table).Scan(&n, &newest); err != nil {
			t.Fatal(err)
		}
		if n != 1 || newest != "payment:new" {
			t.Errorf("%s holds %d rows (newest %q) after the prune, want the one touched after the cutoff", table, n, newest)
		}
	}
}
