package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// lookupSets is the number of sets of the files these tests ingest: enough
// for an ingest to look its keys up before parsing.
const lookupSets = 70

// remitBytes returns a generated 835 of sets sets.
func remitBytes(t *testing.T, r x12gen.Remit, sets int) []byte {
	t.Helper()
	r.SetsPerGroup = sets
	var buf bytes.Buffer
	if _, err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// setBounds returns the offsets of set n (1-based ST02) of data, ST to the
// segment after SE.
func setBounds(t *testing.T, data []byte, n int) (int, int) {
	t.Helper()
	st := bytes.Index(data, fmt.Appendf(nil, "~ST*835*%04d~", n))
	if st < 0 {
		t.Fatalf("no set %d", n)
	}
	se := bytes.Index(data[st:], []byte("~SE*"))
	return st + 1, st + se + 1
}

// rejectSet makes set n of data fail validation (a wrong SE01).
func rejectSet(t *testing.T, data []byte, n int) []byte {
	_, se := setBounds(t, data, n)
	return append(append(append([]byte{}, data[:se]...), "SE*9"...), data[se+3:]...)
}

// alterSet changes the content of set n, keeping its key.
func alterSet(t *testing.T, data []byte, n int) []byte {
	st, se := setBounds(t, data, n)
	out := append([]byte{}, data...)
	i := bytes.Index(out[st:se], []byte("PATIENT"))
	out[st+i+6] = 'X'
	return out
}

// hidden hides a store's claim lookup: ingests through it write every
// payload, as a store without inbox.ClaimLookup would.
type hidden struct {
	inbox.Ingester
	inbox.ControlNumberStore
}

// counting counts the claim lookups and the keys they found claimed.
type counting struct {
	store.Store
	calls, claimed int
}

func (c *counting) ClaimedKeys(ctx context.Context, keys []string) (map[string]inbox.Claim, error) {
	m, err := c.Store.ClaimedKeys(ctx, keys)
	c.calls++
	c.claimed += len(m)
	return m, err
}

// testSecondIngestSameAsFull: an ingest that looks keys up and leaves the
// payloads of claimed sets out records exactly what an ingest writing
// every payload records: the same outcomes, original correlation ids,
// effect and acknowledgment keys, and the same rows. The second file mixes
// duplicates, key conflicts (other content, and a rejected copy of a
// processed set), a processed copy of a rejected set, and new sets. The two ingests run on
// separate key spaces (other sender, receiver and trace) of one store.
func testSecondIngestSameAsFull(t *testing.T, s store.Store) {
	ctx := context.Background()
	type scenario struct{ sender, receiver, trace string }
	run := func(sc scenario, st inbox.Ingester) (norm []string, delta map[string]int, parsed int) {
		gen := x12gen.Remit{Sender: sc.sender, Receiver: sc.receiver, Trace: sc.trace}
		first := remitBytes(t, gen, lookupSets)
		first = rejectSet(t, first, 2)
		second := remitBytes(t, gen, lookupSets+10)
		second = rejectSet(t, second, 3)
		second = alterSet(t, second, 5)
		ingest := func(st inbox.Ingester, path string, data []byte) *inbox.Report {
			r, err := inbox.Ingest(ctx, Options(t, st), inbox.FileInfo{Source: "test",
				Path: sc.trace + path, Size: int64(len(data)), MTime: t0, SHA256: "x",
				CorrelationID: sc.trace + path, Now: t0}, bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return r
		}
		ingest(s, "first.835", first)
		before := counts(t, s)
		r := ingest(st, "second.835", second)
		after := counts(t, s)
		delta = map[string]int{}
		for name, m := range map[string][2]map[string]int{"inbox": {before.Inbox, after.Inbox},
			"outbox": {before.Outbox, after.Outbox}, "sighting": {before.Sightings, after.Sightings},
			"file": {before.Files, after.Files}} {
			for k, v := range m[1] {
				if d := v - m[0][k]; d != 0 {
					delta[name+" "+k] = d
				}
			}
		}
		n := strings.NewReplacer(sc.sender, "S", sc.receiver, "R", sc.trace, "T")
		for _, set := range r.Sets {
			norm = append(norm, fmt.Sprintf("%s %s %s eff=%v conf=%v unbalanced=%v %s", n.Replace(set.Key), set.Outcome,
				n.Replace(set.OriginalCorrelationID), strings.Split(n.Replace(strings.Join(set.EffectKeys, ",")), ","),
				strings.Split(n.Replace(strings.Join(set.ConflictKeys, ",")), ","), set.Unbalanced, set.Reason))
		}
		for _, k := range r.AckKeys {
			// An acknowledgment's key ends with a digest of its group's
			// content, which holds the scenario's trace numbers.
			norm = append(norm, "ack "+n.Replace(k[:strings.LastIndex(k, ":")]))
		}
		f, err := store.ReadFacts(ctx, s, t0.Add(-time.Hour), t0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Parsed {
			if strings.Contains(p.Key, sc.sender) && len(p.Summary) > 2 {
				parsed++
			}
		}
		return norm, delta, parsed
	}
	lookup := &counting{Store: s}
	withLookup, deltaLookup, parsedLookup := run(scenario{"LOOKUPHP", "LOOKUPRCV", "LK"}, lookup)
	full, deltaFull, parsedFull := run(scenario{"FULLHP", "FULLRCV", "FU"}, hidden{Ingester: s, ControlNumberStore: s})
	if lookup.calls != 1 || lookup.claimed != lookupSets-1 {
		t.Errorf("lookup: %d calls found %d claimed sets, want 1 finding %d", lookup.calls, lookup.claimed, lookupSets-1)
	}
	if !reflect.DeepEqual(withLookup, full) {
		for i := range max(len(withLookup), len(full)) {
			var a, b string
			if i < len(withLookup) {
				a = withLookup[i]
			}
			if i < len(full) {
				b = full[i]
			}
			if a != b {
				t.Errorf("with lookup: %s\n         full: %s", a, b)
			}
		}
	}
	if !reflect.DeepEqual(deltaLookup, deltaFull) || parsedLookup != parsedFull {
		t.Errorf("rows written with lookup %v (%d summaries), full %v (%d summaries)", deltaLookup, parsedLookup,
			deltaFull, parsedFull)
	}
	if deltaFull["sighting duplicate"] != lookupSets-3 || deltaFull["outbox pending"] != 10+1 {
		t.Errorf("the second file was not the mix it should be: %v", deltaFull)
	}
}

// testClaimLookupPruned: the inbox rows a lookup found claimed are pruned
// before the write: the ingestion refuses the sets whose payloads were
// left out, and the file is written again with every payload, so no set
// is recorded without its summary and effects.
func testClaimLookupPruned(t *testing.T, s store.Store) {
	testClaimLookupChanged(t, s, func(ctx context.Context, data []byte) error {
		_, err := s.Prune(ctx, t0.Add(time.Hour), 1000)
		return err
	})
}

// testClaimLookupRejected: between the lookup and the write the keys are
// pruned and claimed again by a rejected copy, which the next processing
// arrival reclaims: that arrival is written with every payload.
func testClaimLookupRejected(t *testing.T, s store.Store) {
	testClaimLookupChanged(t, s, func(ctx context.Context, data []byte) error {
		if _, err := s.Prune(ctx, t0.Add(time.Hour), 1000); err != nil {
			return err
		}
		bad := bytes.ReplaceAll(data, []byte("~SE*"), []byte("~SE*9"))
		r, err := Ingest(t, s, "rejected.835", bad)
		if err == nil && r.Count(inbox.Rejected) != changedSets {
			err = fmt.Errorf("rejected copy: %d of %d sets rejected", r.Count(inbox.Rejected), changedSets)
		}
		return err
	})
}

// changedSets is the number of sets of the file whose lookup goes stale:
// more than one PostgreSQL batch, so the refusal may come from a batch
// sent while later sets are still being added.
const changedSets = 1100

// testClaimLookupOneRejected: between the lookup and the write one set in
// the middle of the file becomes a rejection (the keys are pruned and
// claimed again by a copy in which that set alone is rejected): the write
// refuses the file even so, and the second write reclaims that set.
func testClaimLookupOneRejected(t *testing.T, s store.Store) {
	ctx := context.Background()
	data := remitBytes(t, x12gen.Remit{}, changedSets)
	mustIngest(t, s, "first.835", data)
	writes := 0
	opts := Options(t, s)
	opts.BeforeWrite = func(ctx context.Context) error {
		writes++
		if writes > 1 {
			return nil
		}
		if _, err := s.Prune(ctx, t0.Add(time.Hour), 1000); err != nil {
			return err
		}
		_, err := Ingest(t, s, "one-rejected.835", rejectSet(t, data, changedSets/2))
		return err
	}
	r, err := inbox.Ingest(ctx, opts, inbox.FileInfo{Source: "test", Path: "second.835", Size: int64(len(data)), MTime: t0, SHA256: "x",
		CorrelationID: "second", Now: t0}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if writes != 2 || r.Count(inbox.Duplicate) != changedSets-1 || r.Count(inbox.BusinessDuplicate) != 1 ||
		r.Sets[changedSets/2-1].Outcome != inbox.BusinessDuplicate {
		t.Fatalf("%d writes; %d duplicates, %d business duplicates", writes, r.Count(inbox.Duplicate),
			r.Count(inbox.BusinessDuplicate))
	}
	if c := counts(t, s); c.Inbox["processed"] != changedSets || sum(c.Inbox) != changedSets {
		t.Errorf("counts %+v", c)
	}
}

func testClaimLookupChanged(t *testing.T, s store.Store, change func(ctx context.Context, data []byte) error) {
	ctx := context.Background()
	data := remitBytes(t, x12gen.Remit{}, changedSets)
	mustIngest(t, s, "first.835", data)
	writes := 0
	opts := Options(t, s)
	opts.BeforeWrite = func(ctx context.Context) error {
		writes++
		if writes == 1 {
			return change(ctx, data)
		}
		return nil
	}
	r, err := inbox.Ingest(ctx, opts, inbox.FileInfo{Source: "test", Path: "second.835", Size: int64(len(data)), MTime: t0, SHA256: "x",
		CorrelationID: "second", Now: t0}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// The payment effects are still pending in the outbox: every set is
	// claimed anew and is a business duplicate of them.
	if writes != 2 || r.Count(inbox.BusinessDuplicate) != changedSets {
		t.Fatalf("%d writes; outcomes %+v", writes, r.Sets[:3])
	}
	f, err := store.ReadFacts(ctx, s, t0.Add(-time.Hour), t0)
	if err != nil {
		t.Fatal(err)
	}
	withSummary := 0
	for _, p := range f.Parsed {
		if len(p.Summary) > 2 {
			withSummary++
		}
	}
	if c := counts(t, s); withSummary != changedSets || c.Inbox["processed"] != changedSets || sum(c.Inbox) != changedSets {
		t.Errorf("%d of %d sets recorded with their summary; counts %+v", withSummary, changedSets, c)
	}
}

// testSmallFileNotLookedUp: a file of few sets is written without a claim
// lookup (its duplicates carry their payloads), so a one-set ingest costs
// no extra query.
func testSmallFileNotLookedUp(t *testing.T, s store.Store) {
	data := Fixture(t, "835_canonical.x12")
	mustIngest(t, s, "a.835", data)
	lookup := &counting{Store: s}
	r, err := Ingest(t, lookup, "b.835", data)
	if err != nil {
		t.Fatal(err)
	}
	if lookup.calls != 0 || r.Count(inbox.Duplicate) != 1 {
		t.Errorf("%d lookups; outcomes %+v", lookup.calls, r.Sets)
	}
}

// cleanMix returns a generated 835 of sets sets in which set 2 has a bad
// date (a problem that does not reject), set 3 a bad amount (one that
// does) and set 4 is unbalanced; every other set is clean.
func cleanMix(t *testing.T, sets int) []byte {
	data := remitBytes(t, x12gen.Remit{}, sets)
	second := bytes.Index(data, []byte("CLP*PCN2-1*"))
	data = append(data[:second:second], bytes.Replace(data[second:], []byte("DTM*232*20261101"),
		[]byte("DTM*232*2026110A"), 1)...)
	data = bytes.Replace(data, []byte("CLP*PCN3-1*1*100.00"), []byte("CLP*PCN3-1*1*1X0.00"), 1)
	return bytes.Replace(data, []byte("CLP*PCN4-1*1*100.00*75.00"), []byte("CLP*PCN4-1*1*100.00*76.00"), 1)
}

// testCleanKeptWithTheClaim: the store keeps with each claim whether its
// set was clean (inbox.SetRecord.Clean), and its claim lookup names the
// content hash of exactly the clean sets: not of the set with a problem
// that does not reject, nor the unbalanced one, nor the rejected one
// (whose key it does not name at all). A rejected key reclaimed by a
// clean set becomes clean.
func testCleanKeptWithTheClaim(t *testing.T, s store.Store) {
	ctx := context.Background()
	data := cleanMix(t, lookupSets)
	r := mustIngest(t, s, "mix.835", data)
	if r.Count(inbox.Processed) != lookupSets-1 || r.Count(inbox.Rejected) != 1 || !r.Sets[3].Unbalanced {
		t.Fatalf("the file is not the mix it should be: %d processed, %d rejected, set 4 unbalanced %v",
			r.Count(inbox.Processed), r.Count(inbox.Rejected), r.Sets[3].Unbalanced)
	}
	keys := make([]string, len(r.Sets))
	for i, set := range r.Sets {
		keys[i] = set.Key
	}
	found, err := s.ClaimedKeys(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	hashes := setHashes(t, data)
	for i, k := range keys {
		c, ok := found[k]
		switch {
		case i == 2:
			if ok {
				t.Errorf("rejected set %d named claimed: %+v", i+1, c)
			}
		case !ok:
			t.Errorf("set %d not named claimed", i+1)
		case i == 1 || i == 3:
			if c.CleanHash != "" {
				t.Errorf("set %d named clean: %+v", i+1, c)
			}
		case c.CleanHash != hashes[i]:
			t.Errorf("set %d: clean hash %q, want %q", i+1, c.CleanHash, hashes[i])
		}
	}
	// The rejected set claimed again, clean: its key is reclaimed, clean.
	mustIngest(t, s, "clean.835", remitBytes(t, x12gen.Remit{}, lookupSets))
	found, err = s.ClaimedKeys(ctx, keys[2:3])
	if err != nil {
		t.Fatal(err)
	}
	if c := found[keys[2]]; c.CleanHash == "" || c.CleanHash == hashes[2] {
		t.Errorf("reclaimed set: %+v, want the clean copy's hash", c)
	}
}

// setHashes returns the content hashes of data's sets, in file order.
func setHashes(t *testing.T, data []byte) []string {
	t.Helper()
	f, err := envelope.Parse(bytes.NewReader(data), envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for s := range f.Sets() {
		out = append(out, s.HashHex())
	}
	return out
}

// testCleanDuplicatesAcknowledgedAsBefore: a file whose clean sets are
// claimed already is written with those sets unread, and acknowledged as
// if every set were read. The same file sent again (every set a
// duplicate: clean ones, one with a problem that does not reject, an
// unbalanced one, a rejected one) gets no new 999 and reports what it did
// the first time; a file of the same sets and a new one with a problem
// that does not reject gets a 999 whose key, which carries its group's
// verdict (set 2's problem and the new set's among it), is the very key
// an ingest reading every set gives it, and the same report.
func testCleanDuplicatesAcknowledgedAsBefore(t *testing.T, s store.Store) {
	ctx := context.Background()
	first := cleanMix(t, lookupSets)
	r1 := mustIngest(t, s, "first.835", first)
	if len(r1.AckKeys) != 1 {
		t.Fatalf("first file: acknowledgments %v", r1.AckKeys)
	}
	report := func(r *inbox.Report) string {
		var b strings.Builder
		for i, set := range r.Sets {
			if set.Unbalanced || set.Reason != "" {
				fmt.Fprintf(&b, "set %d unbalanced=%v %s; ", i+1, set.Unbalanced, set.Reason)
			}
		}
		return b.String()
	}
	ingest := func(st inbox.Ingester, path string, data []byte) *inbox.Report {
		r, err := inbox.Ingest(ctx, Options(t, st), inbox.FileInfo{Source: "test", Path: path,
			Size: int64(len(data)), MTime: t0, SHA256: path, CorrelationID: path, Now: t0}, bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return r
	}
	lookup := &counting{Store: s}
	again := ingest(lookup, "again.835", first)
	if lookup.calls != 1 || again.Count(inbox.Duplicate) != lookupSets || len(again.AckKeys) != 0 ||
		report(again) != report(r1) {
		t.Errorf("sent again: %d lookups, %d duplicates, new acknowledgments %v; report %q, first %q",
			lookup.calls, again.Count(inbox.Duplicate), again.AckKeys, report(again), report(r1))
	}
	// The same sets and a new one, with a bad date in its first claim.
	more := cleanMix(t, lookupSets+1)
	last := bytes.Index(more, fmt.Appendf(nil, "CLP*PCN%d-1*", lookupSets+1))
	more = append(more[:last:last], bytes.Replace(more[last:], []byte("DTM*232*20261101"),
		[]byte("DTM*232*2026110A"), 1)...)
	r2 := ingest(lookup, "more.835", more)
	r3 := ingest(hidden{Ingester: s, ControlNumberStore: s}, "more-again.835", more)
	if lookup.calls != 2 || r2.Count(inbox.Processed) != 1 || len(r2.AckKeys) != 1 || len(r3.AckKeys) != 0 ||
		report(r2) != report(r3) {
		t.Errorf("a new set: %d processed, acknowledgments with lookup %v, reading every set %v; reports %q, %q",
			r2.Count(inbox.Processed), r2.AckKeys, r3.AckKeys, report(r2), report(r3))
	}
	if c := counts(t, s); c.Outbox["pending"] != lookupSets+2 {
		t.Errorf("outbox %v: want %d payments and two 999s", c.Outbox, lookupSets)
	}
}

// testClaimedAcksPerGroup: the acknowledgments of a file whose sets come
// one group after another, added as claimed or with their payloads, are
// each left out only for a key conflict in their own group, whichever
// later group has one, and keep file order.
func testClaimedAcksPerGroup(t *testing.T, s store.Store) {
	for _, claimed := range []bool{true, false} {
		t.Run(fmt.Sprint("claimed=", claimed), func(t *testing.T) { claimedAcksPerGroup(t, s, claimed) })
	}
}

func claimedAcksPerGroup(t *testing.T, s store.Store, claimed bool) {
	ctx := context.Background()
	groups := []string{"G1", "G2", "G3"}
	prefix := fmt.Sprintf("x12:%v", claimed)
	var first []inbox.SetRecord
	for _, g := range groups {
		first = append(first, inbox.SetRecord{Key: prefix + g + ":1", ContentHash: "h-" + g, Type: "835"})
	}
	addSets(t, s, prefix+"-first", first)
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "again", Size: 1, MTime: t0, SHA256: "sha-again",
		CorrelationID: prefix + "-again", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Rollback()
	for _, g := range groups {
		hash := "h-" + g
		if g == "G2" {
			hash = "other" // a key conflict
		}
		if err := ing.AddSet(ctx, inbox.SetRecord{Key: prefix + g + ":1", ContentHash: hash, Type: "835",
			Claimed: claimed}); err != nil {
			t.Fatal(err)
		}
		if err := ing.AddAck(ctx, outbox.Effect{Kind: "ack.999", Key: prefix + "ack999:" + g, OrderingKey: "acks",
			Sink: "acks", Hash: "a-" + g, Payload: json.RawMessage(`{}`), UnlessConflictIn: prefix + g + ":"}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := ing.Commit(ctx, inbox.FileIngested, "")
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []inbox.Outcome
	for _, set := range r.Sets {
		outcomes = append(outcomes, set.Outcome)
	}
	if !slices.Equal(outcomes, []inbox.Outcome{inbox.Duplicate, inbox.Conflict, inbox.Duplicate}) {
		t.Errorf("outcomes %v, want duplicate, conflict, duplicate", outcomes)
	}
	if want := []string{prefix + "ack999:G1", prefix + "ack999:G3"}; !slices.Equal(r.AckKeys, want) {
		t.Errorf("acknowledgments %v, want %v: those of the groups without a key conflict", r.AckKeys, want)
	}
}
