package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/migrations"
)

// TestUpgradePastPackedPayloadsDeliversRowsOfThePreviousRelease: a
// database of the release before packed payloads (migrations up to 0010)
// holding pending, in-flight (its lease lapsed in the upgrade) and dead
// rows is migrated through 0011 and 0012; every row is then claimed,
// reaped or replayed with exactly the payload it was stored with.
func TestUpgradePastPackedPayloadsDeliversRowsOfThePreviousRelease(t *testing.T) {
	ctx := context.Background()
	s := storeMigratedBefore(t, 11)
	want := map[string]string{
		"payment:pending":  `{"amount":"600.00","payee":"Clínica Ñandú"}`,
		"payment:inflight": " \n{\"amount\":\"1.00\"}",
		"payment:dead":     `{"amount":"2.50","x12":"ISA*00*~"}`,
	}
	for key, status := range map[string]string{"payment:pending": "pending", "payment:inflight": "inflight",
		"payment:dead": "dead"} {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id,
			payload, status, lease_token, lease_expires_at, next_attempt_at, created_at, updated_at)
			VALUES (?, 'payment.posted', 'ledger', ?, 'c', ?, ?, CASE ?4 WHEN 'inflight' THEN 'old-token' END,
			CASE ?4 WHEN 'inflight' THEN 1 END, 1, 1, 1)`, key, key, want[key], status); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	got := map[string]string{}
	dead, err := s.ListDead(ctx, outbox.DeadFilter{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dead {
		got["listed "+r.EffectKey] = string(r.Payload)
	}
	if n, err := s.ReapExpired(ctx, now); err != nil || n != 1 {
		t.Fatalf("reaped %d: %v", n, err)
	}
	if n, err := s.Replay(ctx, outbox.DeadFilter{}, now); err != nil || n != 1 {
		t.Fatalf("replayed %d: %v", n, err)
	}
	rows, err := s.Claim(ctx, now.Add(time.Second), nil, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		got[r.EffectKey] = string(r.Payload)
	}
	if got["listed payment:dead"] != want["payment:dead"] {
		t.Errorf("dead row listed with payload %q", got["listed payment:dead"])
	}
	for key, p := range want {
		if got[key] != p {
			t.Errorf("%s claimed with payload %q, want %q", key, got[key], p)
		}
	}
}

// storeMigratedBefore returns a store whose database has the migrations
// before version applied, as a release of ediwatch before it left it.
func storeMigratedBefore(t *testing.T, version int) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ediwatch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	all, err := migrations.Of("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,
		name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Version >= version {
			break
		}
		if _, err := s.db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestUpgradeTo0014RefusesTheBuildBefore: the rebuilt outbox has its
// indexes and trigger again, and an insert on the effect key alone, as the
// build before wrote every row, fails rather than give a further sink a
// second row.
func TestUpgradeTo0014RefusesTheBuildBefore(t *testing.T) {
	ctx := context.Background()
	s := upgradedWith(t, storetest.LegacyMultiSinkRows(t))
	var indexes int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE tbl_name = 'outbox'
		AND type IN ('index', 'trigger')`).Scan(&indexes); err != nil || indexes != 17 {
		// Nine after 0014's rebuild, 0016's three, 0017's three triggers,
		// 0018's index and 0020's.
		t.Errorf("the outbox has %d indexes and triggers after its rebuild, want 17 (%v)", indexes, err)
	}
	// A replica of the build before inserts on the effect key alone: it
	// fails, loudly, rather than give a further sink a second row.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id,
		stored_payload, next_attempt_at, created_at, updated_at) VALUES ('@audit:payment:9:OLD', 'payment.posted',
		'audit', 'p', 'c', '{}', 1, 1, 1) ON CONFLICT (effect_key) DO NOTHING`); err == nil ||
		!strings.Contains(err.Error(), "ON CONFLICT") {
		t.Errorf("an insert on the effect key alone, as the build before wrote every row: %v", err)
	}
}

// upgradedWith returns a store migrated before 0014 that held rows, as the
// release before left them, and was then migrated to the last migration.
func upgradedWith(t *testing.T, rows []storetest.LegacyRow) *Store {
	t.Helper()
	ctx := context.Background()
	s := storeMigratedBefore(t, 14)
	for _, r := range rows {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id,
			stored_payload, status, next_attempt_at, created_at, updated_at, effect_hash)
			VALUES (?, ?, ?, ?, 'c', ?, ?, 1, 1, 1, ?)`, r.Key, r.Effect.Kind, r.Sink, r.Effect.OrderingKey,
			r.Effect.StoredPayload(), r.Status, r.Effect.Hash); err != nil {
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
