package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
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
		"EXECUTE set_key('x12:P:ZZ:A:ZZ:B:', 'x12:P:ZZ:A:ZZ:B:' || chr(127), ':A:B:1:837:0001')": "inbox_key on inbox",
		"EXECUTE claim_key('claimorder:x')":                          "outbox_claim_order",
		"EXECUTE set_key_env('x12:P:ZZ:A:ZZ:B:', ':A:B:1:837:0001')": "inbox_key_sans_isa13 on inbox",
		// the same lookup, for sets stored before migration 0011
		"EXECUTE set_key_env('x12:P:ZZ:A:ZZ:B:', ':A:B:2:837:0001')": "inbox_key_sans_isa13_before on inbox",
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

// TestKeySansISA13IsTheIndexExpression: the key less its ISA13 that
// ediwatch stores in inbox.key_sans_isa13 is, for any key, what the
// expression of the index for rows stored before (and of migration 0008)
// gives.
func TestKeySansISA13IsTheIndexExpression(t *testing.T) {
	s := newStore(t).(*Store)
	keys := []string{"", ":", "sha256:ab", "x12:P:ZZ:A:ZZ:B", "x12:P:ZZ:A:ZZ:B:", "x12:P:ZZ:A:ZZ:B:000000001",
		"x12:P:ZZ:A:ZZ:B:000000001:A:B:1:837:0001", "::::::::::", "a:b:c:d:e:f:g:h", "é:ü:\u2028:::::x:y"}
	rapid.Check(t, func(t *rapid.T) {
		keys = append(keys, rapid.StringOf(rapid.SampledFrom([]rune("ab:é0"))).Draw(t, "key"))
	})
	want := make([]string, len(keys))
	for i, k := range keys {
		want[i] = keySansISA13(k)
	}
	var got []string
	if err := s.pool.QueryRow(context.Background(), `SELECT array_agg(regexp_replace(k, '^((?:[^:]*:){6})[^:]*', '\1')
		ORDER BY n) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, n)`, keys).Scan(&got); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if got[i] != want[i] {
			t.Errorf("key %q: stored %q, the index expression gives %q", keys[i], want[i], got[i])
		}
	}
}

// TestSetKeyFindsSetsStoredBeforeMigration0011: a 999's lookup finds a
// set stored before migration 0011 (no key_sans_isa13: found by the
// expression) and one stored after (by the column, which it fills).
func TestSetKeyFindsSetsStoredBeforeMigration0011(t *testing.T) {
	ctx := context.Background()
	s := storeMigratedBefore(t, 11)
	const prefix = "x12:P:ZZ:A:ZZ:B:"
	old, later := prefix+"000000001:A:B:1:837:0001", prefix+"000000002:A:B:2:837:0001"
	if _, err := s.pool.Exec(ctx, `INSERT INTO inbox (key, status, content_hash, set_type, source, path, file_sha256,
		correlation_id, created_at, updated_at) VALUES ($1, 'processed', 'h', '837', 's', 'p', 'f', 'c', now(), now())`,
		old); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "new.837", Size: 1, MTime: t0,
		SHA256: "sha-new", CorrelationID: store.NewCorrelationID(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Rollback()
	if err := ing.AddSet(ctx, inbox.SetRecord{Key: later, ContentHash: "h2", Type: "837"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
		t.Fatal(err)
	}
	for key, suffix := range map[string]string{old: ":A:B:1:837:0001", later: ":A:B:2:837:0001"} {
		if got, err := s.SetKey(ctx, prefix, suffix); err != nil || got != key {
			t.Errorf("SetKey(%s): %q %v, want %s", suffix, got, err, key)
		}
	}
	var stored *string
	if err := s.pool.QueryRow(ctx, "SELECT key_sans_isa13 FROM inbox WHERE key = $1", later).Scan(&stored); err != nil ||
		stored == nil || *stored != prefix+":A:B:2:837:0001" {
		t.Errorf("key_sans_isa13 of a new set: %v %v", stored, err)
	}
}

// TestClaimedKeysProbesOnlyItsKeys: the lookup of a large file's keys
// before its sets are processed probes the inbox for each key asked about;
// it never reads the whole inbox (a hash of every key ever claimed), which
// the planner chooses for a plain join given thousands of keys.
func TestClaimedKeysProbesOnlyItsKeys(t *testing.T) {
	s := newStore(t).(*Store)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `INSERT INTO inbox (key, status, content_hash, set_type, source, path, file_sha256,
		correlation_id, created_at, updated_at)
		SELECT 'x12:' || g, CASE WHEN g % 10 = 0 THEN 'rejected' ELSE 'processed' END, 'h', '835', 's', 'p', 'f', 'c',
			now(), now()
		FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE inbox"); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = fmt.Sprintf("x12:%d", 2*i+1+(i%2)*30000) // half claimed, half not
	}
	got, err := s.ClaimedKeys(ctx, keys)
	if err != nil || len(got) != 2500 {
		t.Fatalf("%d claimed keys (%v), want 2500", len(got), err)
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+claimedKeysSQL, keys)
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
	if strings.Contains(plan.String(), "Seq Scan") || strings.Contains(plan.String(), "Hash") {
		t.Errorf("the lookup reads the whole inbox:\n%s", plan.String())
	}
}
