package postgres

import (
	"context"
	"strings"
	"testing"
)

// TestInboxKeyIsIndexedOnce: the inbox key, the largest index of a year
// of history, has one index (unique, in byte order), which the claim's
// equality and ON CONFLICT and a TA1's range lookup all use; the key less
// its ISA13 has a hash index.
func TestInboxKeyIsIndexedOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	rows, err := s.pool.Query(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'inbox'`)
	if err != nil {
		t.Fatal(err)
	}
	var onKey, sans []string
	for rows.Next() {
		var def string
		if err := rows.Scan(&def); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.Contains(def, "(key text_pattern_ops)"), strings.Contains(def, "(key)"):
			onKey = append(onKey, def)
		case strings.Contains(def, "(key_sans_isa13)"):
			sans = append(sans, def)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(onKey) != 1 || !strings.HasPrefix(onKey[0], "CREATE UNIQUE INDEX") {
		t.Errorf("indexes of inbox.key: %q, want one unique index", onKey)
	}
	if len(sans) != 1 || !strings.Contains(sans[0], "USING hash") {
		t.Errorf("indexes of inbox.key_sans_isa13: %q, want one hash index", sans)
	}
	// The unique index holds: a second row of a key is refused.
	q := `INSERT INTO inbox (key, status, content_hash, set_type, source, path, file_sha256, correlation_id, created_at,
		updated_at) VALUES ('x12:k', 'processed', 'h', '835', 's', 'p', 'f', 'c', now(), now())`
	if _, err := s.pool.Exec(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "inbox_key") {
		t.Errorf("a second row of one key: %v, want a unique violation of inbox_key", err)
	}
}
