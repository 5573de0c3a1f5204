package sqlite

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/migrations"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t testing.TB) store.Store {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "ediwatch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

// TestKeysMigrationKeepsRows: migration 0003 rebuilds inbox and sighting
// (SQLite cannot alter a CHECK constraint); rows written under 0001 keep
// every column, and outbox rows get an empty effect hash.
func TestKeysMigrationKeepsRows(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ediwatch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	schema, err := fs.ReadFile(migrations.FS, "sqlite/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{string(schema),
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO inbox VALUES ('x12:K', 'rejected', 'h', '835', 'r', '{"a":1}', 'src', 'p', 'sha', 'corr', 5, 6)`,
		`INSERT INTO sighting VALUES (7, 'conflict', 'x12:K', 'h2', 'src', 'p2', 'sha2', 'corr2', 'corr', 8)`,
		`INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id, payload, next_attempt_at,
			created_at, updated_at) VALUES ('payment:P:T', 'payment.posted', 'ledger', 'o', 'corr', '{}', 1, 1, 1)`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var inbox, sighting, hash string
	s.db.QueryRowContext(ctx, `SELECT key||status||content_hash||set_type||reason||summary||source||path||file_sha256||
		correlation_id||created_at||updated_at FROM inbox`).Scan(&inbox)
	s.db.QueryRowContext(ctx, `SELECT id||kind||key||content_hash||source||path||file_sha256||correlation_id||
		original_correlation_id||created_at FROM sighting`).Scan(&sighting)
	s.db.QueryRowContext(ctx, `SELECT 'hash:'||effect_hash FROM outbox`).Scan(&hash)
	if inbox != `x12:Krejectedh835r{"a":1}srcpshacorr56` || sighting != "7conflictx12:Kh2srcp2sha2corr2corr8" || hash != "hash:" {
		t.Errorf("after migration: inbox %q, sighting %q, outbox %q", inbox, sighting, hash)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE inbox SET status = 'conflict'`); err != nil {
		t.Errorf("status conflict refused: %v", err)
	}
}
