package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSetKeyOfA999ReadsOnlyItsKey: the lookup of the set a 999 answers is
// a search of the index on the key less its ISA13 (migrations 0008, 0011), not a
// read of every key the two parties exchanged: a year of history must not
// make each AK2 a scan of it.
func TestSetKeyOfA999ReadsOnlyItsKey(t *testing.T) {
	s := newStore(t).(*Store)
	ctx := context.Background()
	const n = 3000
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("x12:P:ZZ:RIVERSIDE:ZZ:CLEARING:%09d:RIVERSIDE:CLEARING:%d:837:0001", i, i)
		if _, err := s.db.ExecContext(ctx, `INSERT INTO inbox (key, status, content_hash, set_type, source, path,
			file_sha256, correlation_id, created_at, updated_at, key_sans_isa13)
			VALUES (?, 'processed', 'h', '837', 's', 'p', 'f', 'c', ?, ?, ?)`, key, i, i, keySansISA13(key)); err != nil {
			t.Fatal(err)
		}
	}
	prefix, suffix := "x12:P:ZZ:RIVERSIDE:ZZ:CLEARING:", ":RIVERSIDE:CLEARING:1234:837:0001"
	if got, err := s.SetKey(ctx, prefix, suffix); err != nil || got != prefix+"000001234"+suffix {
		t.Fatalf("SetKey = %q, %v", got, err)
	}
	q, args := setKeyQuery(prefix, suffix)
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		rows.Scan(&id, &parent, &unused, &detail)
		plan.WriteString(detail + "\n")
	}
	rows.Close()
	if !strings.Contains(plan.String(), "USING INDEX inbox_key_sans_isa13 (key_sans_isa13=?)") {
		t.Errorf("the lookup does not search the index on the key less its ISA13:\n%s", plan.String())
	}
}

// TestKeySansISA13MigrationFillsRowsStoredBefore: migration 0011 fills the
// column for rows stored under 0010 with the expression 0008 indexed, and
// ediwatch fills it for new rows in Go: both must give the same value for
// every key, or a 999 would miss the set it answers.
func TestKeySansISA13MigrationFillsRowsStoredBefore(t *testing.T) {
	ctx := context.Background()
	s := storeMigratedBefore(t, 11)
	keys := []string{
		"x12:P:ZZ:RIVERSIDE:ZZ:CLEARING:000000001:RIVERSIDE:CLEARING:1:837:0001",
		"x12:T:01:1234567:ZZ:B:999999999:1234567:B:77:835:ST01",
		"x12:P:ZZ:A:ZZ:B:1:A:B:1:999:1",
		"x12:P:::::::::",
		"x12:P:ZZ:A:ZZ:B:",
		"file:0a1b2c",
		"plain",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		parts := make([]string, 4+rng.IntN(10))
		for i := range parts {
			parts[i] = strings.Repeat("x", rng.IntN(4))
		}
		keys = append(keys, strings.Join(parts, ":"))
	}
	for i, k := range keys {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO inbox (key, status, content_hash, set_type, source, path,
			file_sha256, correlation_id, created_at, updated_at) VALUES (?, 'processed', 'h', '837', 's', 'p', 'f', 'c', ?, ?)
			ON CONFLICT DO NOTHING`, k, i, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT key, key_sans_isa13 FROM inbox")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key string
		var got sql.NullString
		if err := rows.Scan(&key, &got); err != nil {
			t.Fatal(err)
		}
		want := keySansISA13(key)
		if (want == nil) != !got.Valid || (want != nil && want.(string) != got.String) {
			t.Errorf("key %q: migration filled %v, ediwatch fills %v", key, got, want)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("only %d rows", n)
	}
}
