package postgres

import (
	"context"
	"strings"
	"testing"
)

// TestGroupConflictCheckReadsKeyConflictsOnly: the check each 999 makes
// before it is recorded (ackSQL: did a set of its group turn out a key
// conflict?) reads the partial index of key conflicts (migration 0015),
// not every sighting of the file, once the file has many: a re-sent file
// of 8,000 one-set interchanges took 4.6 s a second time through the
// correlation id's index and 2.0 s through this one (`ediwatch ingest`,
// twice), and the time grew with the square of the groups.
func TestGroupConflictCheckReadsKeyConflictsOnly(t *testing.T) {
	s := openSchema(t, Options{})
	ctx := context.Background()
	const check = `EXPLAIN SELECT 1 FROM sighting WHERE kind = 'conflict' AND correlation_id = $1
		AND substr(key, 1, length($2)) = $2`
	if !strings.Contains(ackSQL, "kind = 'conflict' AND correlation_id = $5\n\t                             AND substr(key, 1, length($8)) = $8") {
		t.Fatalf("ackSQL's check is not the one explained here:\n%s", ackSQL)
	}
	// As an ingest sees it: its sightings written in its own
	// transaction, not yet analyzed; then once analyzed.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256,
		correlation_id, created_at)
		SELECT CASE WHEN i % 1000 = 0 THEN 'conflict' ELSE 'duplicate' END,
		       'x12:P:ZZ:A:ZZ:B:' || i || ':A:B:' || i || ':835:0001', 'h', 's', 'p', 'f', 'c1', now()
		FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := tx.Exec(ctx, "ANALYZE sighting"); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := tx.Query(ctx, check, "c1", "x12:P:ZZ:A:ZZ:B:7:A:B:7:")
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		p := strings.Join(plan, "\n")
		t.Logf("analyzed %v:\n%s", analyzed, p)
		// Through the key conflicts: the partial index, or the index of
		// kinds alone; never the correlation id's, which holds every
		// sighting of the file.
		if strings.Contains(p, "sighting_correlation") || strings.Contains(p, "Seq Scan") ||
			!strings.Contains(p, "sighting_conflict") && !strings.Contains(p, "Index Scan using sighting_kind") {
			t.Errorf("analyzed %v, plan:\n%s\nwant it through the key conflicts alone", analyzed, p)
		}
	}
}
