package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// addSets records the sets (and then the acknowledgments) as one file,
// named and correlated by corr.
func addSets(t *testing.T, s store.Store, corr string, recs []inbox.SetRecord, acks ...outbox.Effect) *inbox.IngestResult {
	t.Helper()
	res, err := record(s, corr, recs, acks...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func record(s store.Store, corr string, recs []inbox.SetRecord, acks ...outbox.Effect) (*inbox.IngestResult, error) {
	ctx := context.Background()
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: corr, Size: 1, MTime: t0, SHA256: "sha-" + corr,
		CorrelationID: corr, Now: t0})
	if err != nil {
		return nil, err
	}
	defer ing.Rollback()
	for _, r := range recs {
		if err := ing.AddSet(ctx, r); err != nil {
			return nil, fmt.Errorf("%s: add %s: %w", corr, r.Key, err)
		}
	}
	for _, a := range acks {
		if err := ing.AddAck(ctx, a); err != nil {
			return nil, fmt.Errorf("%s: ack %s: %w", corr, a.Key, err)
		}
	}
	res, err := ing.Commit(ctx, inbox.FileIngested, "")
	if err != nil {
		return nil, fmt.Errorf("%s: commit: %w", corr, err)
	}
	return res, nil
}

// testEffectConflictConcurrently: documents of one payment number, half
// with one content and half with another, arrive at once under distinct
// envelope keys. One posts; every arrival with its content is a business
// duplicate, every arrival with the other a conflict.
func testEffectConflictConcurrently(t *testing.T, s store.Store) {
	const n = 24
	results := make([]*inbox.IngestResult, n)
	errs := make([]error, n)
	hash := func(i int) string { return []string{"even", "odd"}[i%2] }
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = record(s, fmt.Sprintf("arrival-%d", i), []inbox.SetRecord{{
				Key: fmt.Sprintf("x12:%d", i), ContentHash: "c", Type: "835",
				Effects: []outbox.Effect{payment("payment:P:T1", hash(i))}}})
		}()
	}
	wg.Wait()
	winner := -1
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("arrival %d: %v", i, errs[i])
		}
		if r.Sets[0].Outcome == inbox.Processed {
			if winner >= 0 {
				t.Fatalf("arrivals %d and %d both posted", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("nothing posted")
	}
	for i, r := range results {
		want := inbox.BusinessDuplicate
		if hash(i) != hash(winner) {
			want = inbox.Conflict
		}
		if i != winner && r.Sets[0].Outcome != want {
			t.Errorf("arrival %d (%s, posted %s): %s, want %s", i, hash(i), hash(winner), r.Sets[0].Outcome, want)
		}
	}
	c := counts(t, s)
	if c.Sightings["effect_conflict"] != n/2 || c.Sightings["business_duplicate"] != n/2-1 || sum(c.Outbox) != 1 {
		t.Errorf("counts %+v", c)
	}
}

func payment(key, hash string) outbox.Effect {
	return outbox.Effect{Kind: "payment.posted", Key: key, OrderingKey: key, Sink: "ledger", Hash: hash,
		Payload: json.RawMessage(`{"hash":"` + hash + `"}`)}
}

// testRejectedKeyClaimedByNextProcessing: a rejection is not processing.
// The next arrival of a rejected key that processes claims it, whatever
// its content hash — also the very hash of the rejected arrival (a set cut
// off before its GE/IEA, then re-sent whole, hashes the same). A rejected
// arrival of a rejected key is a duplicate with the same hash and
// re-records the rejection with another.
func testRejectedKeyClaimedByNextProcessing(t *testing.T, s store.Store) {
	const key = "x12:P:ZZ:A:ZZ:B:000000001:A:B:1:835:0001"
	rejected := inbox.SetRecord{Key: key, ContentHash: "h1", Type: "835", Rejected: true, Reason: "interchange rejected: iea_missing"}
	if r := addSets(t, s, "stalled", []inbox.SetRecord{rejected}); r.Sets[0].Outcome != inbox.Rejected {
		t.Fatalf("first arrival: %+v", r.Sets)
	}
	if r := addSets(t, s, "stalled-again", []inbox.SetRecord{rejected}); r.Sets[0].Outcome != inbox.Duplicate ||
		r.Sets[0].OriginalCorrelationID != "stalled" {
		t.Errorf("the same rejected arrival again: %+v, want a duplicate of the first", r.Sets)
	}
	other := rejected
	other.ContentHash, other.Reason = "h2", "transaction set rejected: se01_count"
	if r := addSets(t, s, "other-rejected", []inbox.SetRecord{other}); r.Sets[0].Outcome != inbox.Rejected {
		t.Errorf("another rejected arrival: %+v, want the rejection re-recorded", r.Sets)
	}
	// The complete re-send: the same hash as the rejected row.
	complete := inbox.SetRecord{Key: key, ContentHash: "h2", Type: "835",
		Effects: []outbox.Effect{payment("payment:P:T1", "e1")}}
	r := addSets(t, s, "complete", []inbox.SetRecord{complete})
	if o := r.Sets[0]; o.Outcome != inbox.Processed || !slices.Equal(o.EffectKeys, []string{"payment:P:T1"}) ||
		o.OriginalCorrelationID != "complete" {
		t.Fatalf("the complete re-send of a rejected key: %+v, want processed with its payment", r.Sets)
	}
	if r := addSets(t, s, "complete-again", []inbox.SetRecord{complete}); r.Sets[0].Outcome != inbox.Duplicate ||
		r.Sets[0].OriginalCorrelationID != "complete" {
		t.Errorf("the complete copy again: %+v", r.Sets)
	}
	// Once processed, the key is never reclaimed: a stalled copy of it is
	// a duplicate, other content a key conflict.
	if r := addSets(t, s, "late-stalled", []inbox.SetRecord{other}); r.Sets[0].Outcome != inbox.Duplicate {
		t.Errorf("a stalled copy of a processed key: %+v", r.Sets)
	}
	if r := addSets(t, s, "late-other", []inbox.SetRecord{rejected}); r.Sets[0].Outcome != inbox.Conflict {
		t.Errorf("other content for a processed key: %+v", r.Sets)
	}
	c := counts(t, s)
	if c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 || sum(c.Outbox) != 1 ||
		c.Sightings["duplicate"] != 3 || c.Sightings["conflict"] != 1 {
		t.Errorf("counts %+v", c)
	}
}

// testEffectConflict: an existing effect key with the same business
// content is a business duplicate; with other content (another amount
// under the same payment number) it is a conflict, recorded as a sighting
// and listed for reconciliation, never dropped as a duplicate.
func testEffectConflict(t *testing.T, s store.Store) {
	ctx := context.Background()
	set := func(key string, effects ...outbox.Effect) []inbox.SetRecord {
		return []inbox.SetRecord{{Key: key, ContentHash: "c-" + key, Type: "835", Effects: effects}}
	}
	if r := addSets(t, s, "first", set("x12:A", payment("payment:P:T1", "e1"))); r.Sets[0].Outcome != inbox.Processed {
		t.Fatalf("first: %+v", r.Sets)
	}
	if r := addSets(t, s, "regenerated", set("x12:B", payment("payment:P:T1", "e1"))); r.Sets[0].Outcome != inbox.BusinessDuplicate {
		t.Errorf("same effect, same content: %+v, want a business duplicate", r.Sets)
	}
	// The acknowledgment of a set in effect conflict is still queued: the
	// set itself was accepted; its business content awaits review.
	ack := outbox.Effect{Kind: "ack.999", Key: "ack999:x12:C", OrderingKey: "acks", Sink: "acks", Hash: "a",
		Payload: json.RawMessage(`{}`), UnlessConflictIn: "x12:C"}
	r := addSets(t, s, "other-amount", set("x12:C", payment("payment:P:T1", "e2")), ack)
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 ||
		!slices.Equal(o.ConflictKeys, []string{"payment:P:T1"}) || o.OriginalCorrelationID != "first" {
		t.Fatalf("same effect key, other content: %+v, want a conflict with the first", r.Sets)
	}
	if !slices.Equal(r.AckKeys, []string{"ack999:x12:C"}) {
		t.Errorf("acknowledgment of the conflicting set: %v", r.AckKeys)
	}
	if r := addSets(t, s, "other-amount-again", set("x12:C", payment("payment:P:T1", "e2"))); r.Sets[0].Outcome != inbox.Duplicate {
		t.Errorf("the conflicting file again: %+v, want a duplicate", r.Sets)
	}
	// A set with a new effect and a conflicting one: the new one posts,
	// the set is a conflict.
	r = addSets(t, s, "mixed", set("x12:D", payment("payment:P:T2", "e3"), payment("payment:P:T1", "e4")))
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || !slices.Equal(o.EffectKeys, []string{"payment:P:T2"}) ||
		!slices.Equal(o.ConflictKeys, []string{"payment:P:T1"}) {
		t.Errorf("mixed set: %+v", r.Sets)
	}
	// A row written before effect hashes existed never conflicts.
	addSets(t, s, "legacy", set("x12:E", payment("payment:P:T3", "")))
	if r := addSets(t, s, "after-legacy", set("x12:F", payment("payment:P:T3", "e5"))); r.Sets[0].Outcome != inbox.BusinessDuplicate {
		t.Errorf("an effect whose row has no hash: %+v", r.Sets)
	}
	c := counts(t, s)
	if c.Sightings["effect_conflict"] != 2 || c.Sightings["business_duplicate"] != 2 || c.Sightings["duplicate"] != 1 ||
		c.Inbox["conflict"] != 1 || c.Inbox["processed"] != 5 || c.Outbox["pending"] != 4 {
		t.Errorf("counts %+v", c)
	}
	rows, _ := s.Claim(ctx, t0, []string{"ledger"}, 10, 0)
	for _, row := range rows {
		if row.EffectKey == "payment:P:T1" && string(row.Payload) != `{"hash": "e1"}` && string(row.Payload) != `{"hash":"e1"}` {
			t.Errorf("the posted payment was replaced: %s", row.Payload)
		}
	}
	f, err := store.ReadFacts(ctx, s, t0.Add(-1), t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Conflicts) != 2 || f.Conflicts[0].Kind != "effect_conflict" || f.Conflicts[0].Key != "payment:P:T1" ||
		f.Conflicts[0].CorrelationID != "other-amount" || f.Conflicts[0].OriginalCorrelationID != "first" ||
		f.Conflicts[0].Path != "other-amount" || !f.Conflicts[0].At.Equal(t0) {
		t.Errorf("conflicts for reconciliation: %+v", f.Conflicts)
	}
}
