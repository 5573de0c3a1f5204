package postgres

import (
	"context"
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
		"PREPARE set_key(text, text, text) AS " + setKeySQL, "PREPARE claim_key(text) AS " + claimKeySQL} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for exec, index := range map[string]string{
		"EXECUTE set_key('x12:P:ZZ:A:ZZ:B:', 'x12:P:ZZ:A:ZZ:B:' || chr(127), ':A:B:1:837:0001')": "inbox_key_pattern",
		"EXECUTE claim_key('claimorder:x')": "outbox_claim_order",
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
