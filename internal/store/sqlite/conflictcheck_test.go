package sqlite

import (
	"context"
	"strings"
	"testing"
)

// TestGroupConflictCheckReadsKeyConflictsOnly: the check each 999 makes
// before it is recorded (did a set of its group turn out a key
// conflict?) reads the partial index of key conflicts, not every sighting
// of the file: a re-sent file of 8,000 one-set interchanges (8,000
// duplicate sightings, 8,000 checks) took 4.0 s a second time through
// the correlation id's index and 0.6 s through this one (`ediwatch
// ingest`, twice), and the time grew with the square of the groups.
func TestGroupConflictCheckReadsKeyConflictsOnly(t *testing.T) {
	ctx := context.Background()
	s, _ := migratedStore(t, "")
	rows, err := s.DB().QueryContext(ctx, "EXPLAIN QUERY PLAN "+conflictsInGroupSQL, "c1", "x12:P:", "x12:P:")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "; "); !strings.Contains(p, "sighting_conflict") {
		t.Errorf("plan %q, want it through sighting_conflict", p)
	}
}
