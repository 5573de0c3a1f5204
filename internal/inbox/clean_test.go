package inbox_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// readEvery hides a store's claim lookup: every set is read.
type readEvery struct {
	inbox.Ingester
	inbox.ControlNumberStore
}

// TestCleanSkipOnlyWhenReadingWouldFindNothing: a set's content hash is
// over its normal form, which drops trailing empty components (and
// spaces, and trailing separators), but the parser reads the raw
// segments: "DTM*232*20261101:" hashes as "DTM*232*20261101" and is an
// invalid date. A clean file sent again with such a segment before every
// SVC (the same content hashes, every set a duplicate) must be
// acknowledged as reading every set acknowledges it: with errors. Skipped
// as ClaimedClean, its 999 was the first file's plain acceptance (found
// by an outside review); such a set is not Normal, so it is read.
func TestCleanSkipOnlyWhenReadingWouldFindNothing(t *testing.T) {
	var a bytes.Buffer
	if _, err := (x12gen.Remit{Trace: "FM", SetsPerGroup: 80, ClaimsPerSet: 2}).Write(&a); err != nil {
		t.Fatal(err)
	}
	variant := bytes.ReplaceAll(a.Bytes(), []byte("~SVC"), []byte(":~SVC"))
	bothStores(t, func(t *testing.T, s, _ store.Store) {
		ctx := context.Background()
		r1, err := ingestWith(ctx, s, 0, "first", bytes.NewReader(a.Bytes()), a.Len())
		if err != nil || r1.Count(inbox.Processed) != 80 || len(r1.AckKeys) != 1 {
			t.Fatalf("first: %v", err)
		}
		r2, err := ingestWith(ctx, s, 0, "variant", bytes.NewReader(variant), len(variant))
		if err != nil {
			t.Fatal(err)
		}
		r3, err := ingestWith(ctx, readEvery{s, s}, 0, "variant-read", bytes.NewReader(variant), len(variant))
		if err != nil {
			t.Fatal(err)
		}
		if r2.Count(inbox.Duplicate) != 80 {
			t.Fatalf("variant: %d duplicates of 80 (content hashes differ?)", r2.Count(inbox.Duplicate))
		}
		// Reading every set finds an invalid date in each: a 999 of its
		// own verdict. With the lookup, the same 999 must have been
		// recorded already (reading every set then adds none).
		if len(r2.AckKeys) != 1 || len(r3.AckKeys) != 0 {
			t.Errorf("acknowledgments with the lookup %v, then reading every set %v: want one, then none",
				r2.AckKeys, r3.AckKeys)
		}
	})
}
