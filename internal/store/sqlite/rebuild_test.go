package sqlite

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

// TestOutboxRebuildKeepsAttemptsAndSchema: migration 0014 rebuilds the
// outbox of a populated database: the rows' attempt histories stay with
// their ids (and go with a row deleted after), and the schema is the one a
// fresh database gets, object for object.
func TestOutboxRebuildKeepsAttemptsAndSchema(t *testing.T) {
	ctx := context.Background()
	s := storeMigratedBefore(t, 14)
	for _, q := range []string{
		`INSERT INTO outbox (id, effect_key, kind, sink, ordering_key, correlation_id, stored_payload, status,
			next_attempt_at, created_at, updated_at) VALUES
			(7, 'payment:1:T', 'payment.posted', 'ledger', 'payment:1:T', 'c', '{}', 'dead', 1, 1, 1),
			(9, '@audit:payment:1:T', 'payment.posted', 'audit', 'payment:1:T', 'c', '{}', 'pending', 1, 1, 1)`,
		`INSERT INTO outbox_attempt VALUES (7, 1, 1, 1, 1, 500, 'http', 'e', 0, ''), (7, 2, 2, 2, 1, 500, 'http', 'e', 0, ''),
			(9, 1, 1, 1, 1, 503, 'http', 'e', 0, '')`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	attempts := func() (n int) {
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM outbox_attempt`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := attempts(); n != 3 {
		t.Errorf("%d attempts after the rebuild, want 3", n)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM outbox WHERE id = 7`); err != nil {
		t.Fatal(err)
	}
	if n := attempts(); n != 1 {
		t.Errorf("%d attempts after row 7 was deleted, want 1 (its trigger)", n)
	}
	schema := func(s *Store) []string {
		rows, err := s.db.QueryContext(ctx, `SELECT type || ' ' || name || ' ' || tbl_name || ': ' || coalesce(sql, '')
			FROM sqlite_master WHERE name <> 'schema_migrations' AND tbl_name <> 'schema_migrations' ORDER BY type, name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var x string
			rows.Scan(&x)
			out = append(out, x)
		}
		return out
	}
	fresh, err := Open(ctx, filepath.Join(t.TempDir(), "fresh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := schema(s), schema(fresh); !slices.Equal(got, want) {
		t.Errorf("migrated schema\n%q\nwant a fresh database's\n%q", got, want)
	}
}
