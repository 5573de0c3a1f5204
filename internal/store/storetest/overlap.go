package storetest

import (
	"bytes"
	"context"
	"encoding/json"
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

// testRunRepeatingItsOwnKeys: a run of sets none of whose keys is claimed
// before, but which repeats its own keys and effect keys, has the outcomes
// of its sets claimed one at a time, in one write: the same key again is
// a duplicate (other content: a key conflict), the same effect under a new
// key a business duplicate (other content: an effect conflict), and a key
// rejected earlier in the run is claimed by a later set that processes.
func testRunRepeatingItsOwnKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	pay := func(trace, hash string) []outbox.Effect {
		return []outbox.Effect{{Kind: "payment.posted", Key: "payment:9:" + trace, OrderingKey: "payment:9:" + trace,
			Sink: "ledger", Payload: json.RawMessage(`{"trace":"` + trace + `"}`), Hash: hash}}
	}
	key := func(n int) string { return fmt.Sprintf("x12:P:ZZ:A:ZZ:B:%09d:A:B:1:835:0001", n) }
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "repeat.835", Size: 1, MTime: t0,
		SHA256: "sha-repeat", CorrelationID: store.NewCorrelationID(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Rollback()
	sets := []inbox.SetRecord{
		{Key: key(1), ContentHash: "h1", Type: "835", Effects: pay("T1", "e1")},
		{Key: key(1), ContentHash: "h1", Type: "835", Effects: pay("T1", "e1")},
		{Key: key(1), ContentHash: "h1-other", Type: "835", Effects: pay("T1", "e1")},
		{Key: key(2), ContentHash: "h2", Type: "835", Effects: pay("T1", "e1")},
		{Key: key(3), ContentHash: "h3", Type: "835", Effects: pay("T1", "e1-other")},
		{Key: key(4), ContentHash: "h4", Type: "835", Rejected: true, Reason: "bad", Effects: pay("T4", "e4")},
		{Key: key(4), ContentHash: "h4", Type: "835", Effects: pay("T4", "e4")},
	}
	for _, r := range sets {
		if err := ing.AddSet(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ing.Commit(ctx, inbox.FileIngested, "")
	if err != nil {
		t.Fatalf("one write of a run repeating its keys: %v", err)
	}
	want := []inbox.Outcome{inbox.Processed, inbox.Duplicate, inbox.Conflict, inbox.BusinessDuplicate,
		inbox.Conflict, inbox.Rejected, inbox.Processed}
	if len(res.Sets) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(res.Sets), len(want), res.Sets)
	}
	for i, r := range res.Sets {
		if r.Outcome != want[i] {
			t.Errorf("set %d (%s): %s, want %s", i+1, r.Key, r.Outcome, want[i])
		}
	}
	if c := counts(t, s); c.Outbox[outbox.StatusPending] != 2 || c.Sightings["duplicate"] != 1 ||
		c.Sightings["conflict"] != 1 || c.Sightings["business_duplicate"] != 1 || c.Sightings["effect_conflict"] != 1 {
		t.Errorf("counts %+v, want the two payments pending and one sighting of each kind", c)
	}
}
