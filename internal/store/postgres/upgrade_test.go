package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestUpgradeTo0014RefusesTheBuildBefore: the old unique constraint is
// gone (one effect key may have a row at each sink), and a replica of the
// build before cannot give a further sink a second row: its claim of an
// "@SINK:" row and its acknowledgment insert on the effect key alone fail.
func TestUpgradeTo0014RefusesTheBuildBefore(t *testing.T) {
	ctx := context.Background()
	s := upgradedWith(t, storetest.LegacyMultiSinkRows(t))
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

	// A replica of the build before calls the claim function as it did:
	// for a payment routed to two sinks, its second row under "@audit:".
	// That fails, and nothing of the set is recorded; a set of rows keyed
	// as this build keys them is claimed. Its acknowledgment insert, on
	// the effect key alone, fails too.
	claim := func(set string, keys ...string) error {
		sinks := []string{"ledger", "audit"}[:len(keys)]
		var outcome string
		return s.pool.QueryRow(ctx, `SELECT outcome FROM ediwatch_claim_set($1, 'h', '835', 'processed', '', NULL,
			'test', 'old.835', 'sha-old', 'corr-old', $2, $3, $4, $4, $5, $6, $7, NULL, false)`,
			set, t0, []string{"payment.posted", "payment.posted"}[:len(keys)], keys, sinks,
			[][]byte{{'{', '}'}, {'{', '}'}}[:len(keys)], []string{"e", "e"}[:len(keys)]).Scan(&outcome)
	}
	if err := claim("x12:old:1", "payment:9:OLD", "@audit:payment:9:OLD"); err == nil ||
		!strings.Contains(err.Error(), "sink prefix") {
		t.Errorf("an older build's \"@audit:\" row claimed: %v", err)
	}
	if err := claim("x12:old:2", "payment:9:NEW"); err != nil {
		t.Errorf("a row keyed as this build keys it: %v", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE key = 'x12:old:1'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the refused set left %d inbox rows (%v)", n, err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id,
		payload_packed, next_attempt_at, created_at, updated_at) VALUES ('ack999:old', 'ack.999', 'acks', 'a', 'c', '\x00', $1, $1, $1)
		ON CONFLICT (effect_key) DO NOTHING`, t0); err == nil || !strings.Contains(err.Error(), "ON CONFLICT") {
		t.Errorf("an insert on the effect key alone, as the build before wrote acknowledgments: %v", err)
	}
}

// upgradedWith returns a store migrated before 0014 that held rows, as the
// release before left them, and was then migrated to the last migration.
func upgradedWith(t *testing.T, rows []storetest.LegacyRow) *Store {
	t.Helper()
	ctx := context.Background()
	s := storeMigratedBefore(t, 14)
	for _, r := range rows {
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
	return s
}

// TestUpgradeTo0014: migration 0014 keys the outbox by effect key and
// sink; the rows the release before left under "@SINK:" keys are found by
// their effect key, pairs of rows of one effect at one sink are delivered
// at most once more, and reconcile counts each payment once
// (storetest.Upgrade0014).
func TestUpgradeTo0014(t *testing.T) {
	storetest.Upgrade0014(t, func(t *testing.T, rows []storetest.LegacyRow) store.Store { return upgradedWith(t, rows) },
		func(t *testing.T, s store.Store) storetest.ReconciledPayer {
			t.Helper()
			rep, err := reconcile.Run(context.Background(), s.(store.Reconciler), time.Unix(0, 0), 24*time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Payers) != 1 {
				t.Fatalf("payers %+v", rep.Payers)
			}
			p := rep.Payers[0]
			return storetest.ReconciledPayer{Enqueued: p.Enqueued, EnqueuedAmount: p.EnqueuedAmount,
				Delivered: p.Delivered, DeliveredAmount: p.DeliveredAmount, UnknownEffects: p.UnknownEffects}
		})
}
