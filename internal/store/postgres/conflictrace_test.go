package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestEffectConflictAtOtherSinksConcurrently: two replicas claim, at
// once, sets of other control numbers carrying one payment key with other
// amounts, routed to other sinks (a route being changed replica by
// replica). No unique index of the outbox joins rows of other sinks, so
// each transaction's "no row of the key holds other content" check could
// read before the other commits, and both post: the payment key (the
// Idempotency-Key) with two amounts. The second claim waits on the key's
// lock (outbox_effect_lock) until the first commits, and is then an effect
// conflict; one content is posted. Both claim functions: one set
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
			run := func(i int, tx pgx.Tx, set, sink, hash string) error {
				sql, args := claim(set, sink, hash)
				rows, err := tx.Query(ctx, sql, args...)
				if err != nil {
					return err
				}
				for rows.Next() {
					var n int32
					var outcome string
					var orig *string
					var ins, conf []string
					if err := rows.Scan(&n, &outcome, &orig, &ins, &conf); err != nil {
						return err
					}
					if n == 1 {
						outcomes[i] = outcome
					}
				}
				return rows.Err()
			}
			first, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Rollback(ctx)
			if err := run(0, first, "x12:1", "ledger", "h1"); err != nil {
				t.Fatal(err)
			}
			// The second claims while the first is open; it commits in
			// the background, and the first commits once the second
			// either finished (both posted, the defect) or waits on a
			// lock (for the first's effect key).
			second := make(chan error, 1)
			go func() {
				tx, err := s.pool.Begin(ctx)
				if err == nil {
					defer tx.Rollback(ctx)
					if err = run(1, tx, "x12:2", "audit", "h2"); err == nil {
						err = tx.Commit(ctx)
					}
				}
				second <- err
			}()
			var secondErr error
			waited := false
		wait:
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				select {
				case secondErr = <-second:
					second <- secondErr
					break wait
				default:
				}
				var waiting int
				if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				if waiting > 0 {
					waited = true
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := first.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if secondErr = <-second; secondErr != nil {
				t.Fatalf("the second claim: %v", secondErr)
			}
			if !waited {
				t.Error("the second claim did not wait for the first, which holds its effect key")
			}
			if outcomes[1] != "conflict" {
				t.Errorf("the second claim, after waiting for the first: %s, want conflict", outcomes[1])
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

// TestEffectLocksBeforeInboxKeysInBothClaimFunctions: a large file's
// transaction claims a run of sets with payment key K (ediwatch_claim_sets
// takes K's lock, then its inbox keys) and stays open; another file's one
// set X, with K too, is claimed meanwhile (ediwatch_claim_set); then the
// large file claims X in a later run. Were the one-set claim to take X's
// inbox key before K's lock, the two would wait for each other
// (deadlock detected, one ingest rolled back); both functions take the
// effect keys' locks first, so the one-set claim waits for the large file
// and finds X claimed: a duplicate.
func TestEffectLocksBeforeInboxKeysInBothClaimFunctions(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)
	const key = "payment:P:T1"
	run := func(set string) []any {
		return []any{[]string{set}, []string{"c-" + set}, []string{"835"}, []string{"processed"}, []string{""},
			[]*string{nil}, []string{set}, "test", "big.835", "sha-big", "corr-big", now, []int32{1},
			[]string{"payment.posted"}, []string{key}, []string{key}, []string{"ledger"}, [][]byte{[]byte("h")},
			[]string{"h"}, []bool{false}}
	}
	ctx := context.Background()
	s := newStore(t).(*Store)
	big, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Rollback(ctx)
	if _, err := big.Exec(ctx, claimSetsSQL, run("x12:Z")...); err != nil {
		t.Fatal(err)
	}
	one := make(chan error, 1)
	var outcome string
	go func() {
		tx, err := s.pool.Begin(ctx)
		if err == nil {
			defer tx.Rollback(ctx)
			err = tx.QueryRow(ctx, `SELECT outcome FROM ediwatch_claim_set($1, 'c-x12:X', '835', 'processed', '', NULL,
				'test', 'one.835', 'sha-one', 'corr-one', $2, $3, $4, $4, $5, $6, $7, 'x12:X', false)`, "x12:X", now,
				[]string{"payment.posted"}, []string{key}, []string{"ledger"}, [][]byte{[]byte("h")}, []string{"h"}).Scan(&outcome)
			if err == nil {
				err = tx.Commit(ctx)
			}
		}
		one <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the one-set claim never waited for the large file, which holds its effect key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := big.Exec(ctx, claimSetsSQL, run("x12:X")...); err != nil {
		t.Fatalf("the large file's later run: %v", err)
	}
	if err := big.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-one; err != nil {
		t.Fatalf("the one-set claim: %v", err)
	}
	if outcome != "duplicate" {
		t.Errorf("the one-set claim of X after the large file claimed it: %s, want duplicate", outcome)
	}
}
