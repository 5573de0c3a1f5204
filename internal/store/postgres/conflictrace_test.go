package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestEffectConflictAtOtherSinksConcurrently: two replicas claim, at
// once, sets of other control numbers carrying one payment key with other
// amounts, routed to other sinks (a route being changed replica by
// replica). Each transaction's "no row of the key holds other content"
// check reads before the other commits, and no unique index joins rows of
// other sinks, so both insert: the payment key (the Idempotency-Key) is
// posted with two amounts. At most one content may be posted; the other
// claim is an effect conflict. Both claim functions: one set
// (ediwatch_claim_set) and a run's set-based path (ediwatch_claim_sets).
func TestEffectConflictAtOtherSinksConcurrently(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)
	const key = "payment:P:T1"
	claimSet := func(set, sink, hash string) (string, []any) {
		return claimSetSQL, []any{set, "c-" + set, "835", "processed", "", nil, "test", set, "sha-" + set, set, now,
			[]string{"payment.posted"}, []string{key}, []string{key}, []string{sink}, [][]byte{[]byte(hash)},
			[]string{hash}, set, false}
	}
	claimSets := func(set, sink, hash string) (string, []any) {
		return claimSetsSQL, []any{[]string{set, set + "-b"}, []string{"c-" + set, "c-" + set + "-b"},
			[]string{"835", "835"}, []string{"processed", "processed"}, []string{"", ""}, []*string{nil, nil},
			[]string{set, set + "-b"}, "test", set, "sha-" + set, set, now,
			[]int32{1, 2}, []string{"payment.posted", "payment.posted"}, []string{key, key + "-" + set},
			[]string{key, key + "-" + set}, []string{sink, sink}, [][]byte{[]byte(hash), []byte(hash)},
			[]string{hash, hash}, []bool{false, false}}
	}
	for name, claim := range map[string]func(set, sink, hash string) (string, []any){
		"claim_set": claimSet, "claim_sets": claimSets} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t).(*Store)
			var outcomes [2]string
			var txs [2]interface {
				Commit(context.Context) error
			}
			for i, a := range [2][3]string{{"x12:1", "ledger", "h1"}, {"x12:2", "audit", "h2"}} {
				tx, err := s.pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				sql, args := claim(a[0], a[1], a[2])
				rows, err := tx.Query(ctx, sql, args...)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var n int32
					var outcome string
					var orig *string
					var ins, conf []string
					if err := rows.Scan(&n, &outcome, &orig, &ins, &conf); err != nil {
						t.Fatal(err)
					}
					if n == 1 {
						outcomes[i] = outcome
					}
				}
				if err := rows.Err(); err != nil {
					t.Fatalf("claim %d: %v", i, err)
				}
				txs[i] = tx
			}
			for i, tx := range txs {
				if err := tx.Commit(ctx); err != nil {
					t.Logf("commit %d: %v", i, err) // a failure here is no defect: nothing posted twice
				}
			}
			var hashes int
			var sinks string
			if err := s.pool.QueryRow(ctx, `SELECT count(DISTINCT effect_hash), string_agg(sink || '=' || effect_hash, ',')
				FROM outbox WHERE effect_key = $1`, key).Scan(&hashes, &sinks); err != nil {
				t.Fatal(err)
			}
			if hashes > 1 {
				t.Errorf("the payment key posted with %d contents (%s), outcomes %v: want one, the other claim an effect conflict",
					hashes, sinks, fmt.Sprint(outcomes))
			}
		})
	}
}
