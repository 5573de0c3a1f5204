package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// testOverlappingLargeFilesConcurrently: three large files, each sharing
// one interchange with each other file (in opposite orders, so their
// runs take the same ordering keys in different orders), ingested at
// once, twice over: every ingest succeeds (a deadlock or a run racing a
// concurrent claim is written again, never a failed file), each set is
// processed exactly once and is a duplicate everywhere else, and each
// effect is queued once.
func testOverlappingLargeFilesConcurrently(t *testing.T, s store.Store) {
	const sets = 250 // more than one run of sets, and looked up before they are written
	interchange := func(control int) []byte {
		var b bytes.Buffer
		if _, err := (x12gen.Remit{Control: control, Trace: fmt.Sprintf("OV%d-", control), SetsPerGroup: sets}).Write(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	one, two, three := interchange(101), interchange(202), interchange(303)
	files := [][]byte{
		append(append([]byte{}, one...), two...),
		append(append([]byte{}, two...), three...),
		append(append([]byte{}, three...), one...),
	}
	var mu sync.Mutex
	processed := map[string]int{}
	outcomes := map[inbox.Outcome]int{}
	for round := range 2 {
		var wg sync.WaitGroup
		for i, data := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := Ingest(t, s, fmt.Sprintf("overlap/%d-%d.835", round, i), data)
				if err != nil {
					t.Errorf("ingest %d of round %d: %v", i, round, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, set := range r.Sets {
					outcomes[set.Outcome]++
					if set.Outcome == inbox.Processed {
						processed[set.Key]++
					}
				}
			}()
		}
		wg.Wait()
	}
	if t.Failed() {
		return
	}
	if len(processed) != 3*sets || outcomes[inbox.Processed] != 3*sets || outcomes[inbox.Duplicate] != 9*sets {
		t.Errorf("%d keys processed, outcomes %v; want %d keys processed once each, %d duplicates",
			len(processed), outcomes, 3*sets, 9*sets)
	}
	c := counts(t, s)
	if c.Inbox["processed"] != 3*sets || c.Outbox[outbox.StatusPending] != 3*sets+3 {
		t.Errorf("counts %+v, want %d sets processed, %d payments and 3 999s pending", c, 3*sets, 3*sets)
	}
}
