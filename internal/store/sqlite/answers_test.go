package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestSetKeyOfA999ReadsOnlyItsKey: the lookup of the set a 999 answers is
// a search of the index on the key less its ISA13 (migration 0008), not a
// read of every key the two parties exchanged: a year of history must not
// make each AK2 a scan of it.
func TestSetKeyOfA999ReadsOnlyItsKey(t *testing.T) {
	s := newStore(t).(*Store)
	ctx := context.Background()
	const n = 3000
	for i := 1; i <= n; i++ {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO inbox (key, status, content_hash, set_type, source, path,
			file_sha256, correlation_id, created_at, updated_at) VALUES (?, 'processed', 'h', '837', 's', 'p', 'f', 'c', ?, ?)`,
			fmt.Sprintf("x12:P:ZZ:RIVERSIDE:ZZ:CLEARING:%09d:RIVERSIDE:CLEARING:%d:837:0001", i, i), i, i); err != nil {
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
	if !strings.Contains(plan.String(), "USING INDEX inbox_key_sans_isa13 (<expr>=?)") {
		t.Errorf("the lookup does not search the index on the key less its ISA13:\n%s", plan.String())
	}
}
