package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestAnswerLookupsUseTheirIndexes: the lookups of SetKey and ClaimKey can
// use the indexes of migration 0007 even as generic plans (the pool
// caches prepared statements, and a generic plan cannot take a prefix out
// of a LIKE parameter).
func TestAnswerLookupsUseTheirIndexes(t *testing.T) {
	s := newStore(t).(*Store)
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{"SET enable_seqscan = off", "SET plan_cache_mode = force_generic_plan",
		"PREPARE set_key(text, text, text) AS " + setKeySQL, "PREPARE claim_key(text) AS " + claimKeySQL,
		"PREPARE set_key_env(text, text) AS " + setKeyByEnvelopeSQL} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for exec, index := range map[string]string{
		"EXECUTE set_key('x12:P:ZZ:A:ZZ:B:', 'x12:P:ZZ:A:ZZ:B:' || chr(127), ':A:B:1:837:0001')": "inbox_key_pattern",
		"EXECUTE claim_key('claimorder:x')":                          "outbox_claim_order",
		"EXECUTE set_key_env('x12:P:ZZ:A:ZZ:B:', ':A:B:1:837:0001')": "inbox_key_sans_isa13",
	} {
		rows, err := conn.Query(ctx, "EXPLAIN "+exec)
		if err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for rows.Next() {
			var line string
			rows.Scan(&line)
			plan.WriteString(line + "\n")
		}
		rows.Close()
		if !strings.Contains(plan.String(), index) {
			t.Errorf("%s does not use %s:\n%s", exec, index, plan.String())
		}
	}
	conn.Exec(ctx, "DEALLOCATE ALL")
	conn.Exec(ctx, "RESET ALL")
}

// TestSetKeyOfA999ReadsOnlyItsKey: the lookup of the set a 999 answers
// reads the keys that match, not every key the two parties exchanged: a
// year of history must not make each AK2 a scan of it (a 999 of thousands
// of AK2s would outlast the ingest deadline). Measured in rows, not time.
func TestSetKeyOfA999ReadsOnlyItsKey(t *testing.T) {
	s := newStore(t).(*Store)
	ctx := context.Background()
	const n = 3000
	if _, err := s.pool.Exec(ctx, `INSERT INTO inbox (key, status, content_hash, set_type, source, path, file_sha256,
		correlation_id, created_at, updated_at)
		SELECT 'x12:P:ZZ:RIVERSIDE:ZZ:CLEARING:' || lpad(g::text, 9, '0') || ':RIVERSIDE:CLEARING:' || g || ':837:0001',
			'processed', 'h', '837', 's', 'p', 'f', 'c', now() - g * interval '1 minute', now()
		FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE inbox"); err != nil {
		t.Fatal(err)
	}
	prefix, suffix := "x12:P:ZZ:RIVERSIDE:ZZ:CLEARING:", ":RIVERSIDE:CLEARING:1234:837:0001"
	if got, err := s.SetKey(ctx, prefix, suffix); err != nil || got != prefix+"000001234"+suffix {
		t.Fatalf("SetKey = %q, %v", got, err)
	}
	q, args := setKeyQuery(prefix, suffix)
	rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	removed := 0
	for rows.Next() {
		var line string
		rows.Scan(&line)
		text.WriteString(line + "\n")
		if _, after, ok := strings.Cut(line, "Rows Removed by Filter: "); ok {
			var k int
			fmt.Sscan(after, &k)
			removed += k
		}
	}
	rows.Close()
	if removed > 10 || strings.Contains(text.String(), "Seq Scan") {
		t.Errorf("the lookup read %d keys it did not want, of %d:\n%s", removed, n, text.String())
	}
}
