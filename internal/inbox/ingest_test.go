package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the time storetest.Ingest stamps on every row.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// eachStore runs fn against a fresh real SQLite and a fresh real
// PostgreSQL store.
func eachStore(t *testing.T, fn func(t *testing.T, s store.Store)) { drivertest.Each(t, fn) }

func mustIngest(t *testing.T, s store.Store, path string, data []byte) *inbox.Report {
	t.Helper()
	r, err := storetest.Ingest(t, s, path, data)
	if err != nil {
		t.Fatalf("ingest %s: %v", path, err)
	}
	return r
}

// deliver claims and completes the due rows of sink until none is left,
// and returns them in the batches the relay would have got them in.
func deliver(t *testing.T, s store.Store, sink string) [][]outbox.Row {
	t.Helper()
	ctx := context.Background()
	var batches [][]outbox.Row
	for {
		rows, err := s.Claim(ctx, t0, []string{sink}, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			return batches
		}
		for _, r := range rows {
			if err := storetest.Complete(ctx, s, r.ID, r.LeaseToken, t0, 200); err != nil {
				t.Fatal(err)
			}
		}
		batches = append(batches, rows)
	}
}

func flat(batches [][]outbox.Row) []outbox.Row {
	var out []outbox.Row
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

// ackX12 returns the X12 of an acknowledgment row.
func ackX12(t *testing.T, r outbox.Row) string {
	t.Helper()
	var ev process.AckEvent
	if err := json.Unmarshal(r.Payload, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.X12
}

func canonical(t *testing.T) []byte { return storetest.Fixture(t, "835_canonical.x12") }

// TestStalledUploadThenCompletePostsOnce: an 835 whose upload stalled
// before GE/IEA is ingested and rejected (iea_missing); the complete file
// then arrives under the same name. Its set has the same content hash as
// the rejected one, yet it is processed: one payment, an accepting 999,
// and reconciliation counts the key once, as processed.
func TestStalledUploadThenCompletePostsOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		full := canonical(t)
		stalled := full[:bytes.Index(full, []byte("GE*1*101~"))]
		first := mustIngest(t, s, "ERA835.txt", stalled)
		if first.Count(inbox.Rejected) != 1 || !strings.Contains(first.Sets[0].Reason, "iea_missing") {
			t.Fatalf("stalled upload: %+v", first.Sets)
		}
		second := mustIngest(t, s, "ERA835.txt", full)
		if o := second.Sets[0]; o.Outcome != inbox.Processed || o.Key != first.Sets[0].Key ||
			!slices.Equal(o.EffectKeys, []string{"payment:1512345678:EFT0001"}) {
			t.Fatalf("complete file after the stalled one: %+v, want processed with one payment", second.Sets)
		}
		if len(second.AckKeys) != 1 || !strings.HasPrefix(second.AckKeys[0], "ack999:") {
			t.Fatalf("acknowledgments of the complete file: %v", second.AckKeys)
		}
		acks := flat(deliver(t, s, "acks"))
		var x999 string
		for _, a := range acks {
			if a.EffectKey == second.AckKeys[0] {
				x999 = ackX12(t, a)
			}
		}
		if !strings.Contains(x999, "IK5*A~") || !strings.Contains(x999, "AK9*A*1*1*1~") {
			t.Errorf("the complete file's 999 does not accept it:\n%s", x999)
		}
		if payments := flat(deliver(t, s, "ledger")); len(payments) != 1 {
			t.Errorf("%d payments delivered, want 1", len(payments))
		}
		if again := mustIngest(t, s, "copy.txt", full); again.Count(inbox.Duplicate) != 1 || len(again.AckKeys) != 0 {
			t.Errorf("the complete file once more: %+v %v", again.Sets, again.AckKeys)
		}
		c, _ := s.Counts(context.Background())
		if c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 {
			t.Errorf("inbox %v", c.Inbox)
		}
		rep, err := reconcile.Run(context.Background(), s, t0.Add(-time.Hour), time.Hour, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Divergent || len(rep.Payers) != 1 || rep.Payers[0].Parsed != 1 || rep.Payers[0].Enqueued != 1 ||
			rep.Payers[0].Delivered != 1 {
			t.Errorf("reconcile: %+v %+v", rep, rep.Payers)
		}
	})
}

// TestCorrectedEnvelopeErrorIsProcessed: a file rejected for an envelope
// error (IEA02, GE01, IEA01) and re-sent corrected, its set unchanged, is
// processed, and its acknowledgment is queued with its own verdict.
func TestCorrectedEnvelopeErrorIsProcessed(t *testing.T) {
	for _, fixture := range []string{"err_iea02_mismatch.x12", "err_ge01_count.x12", "err_iea01_count.x12"} {
		t.Run(strings.TrimSuffix(fixture, ".x12"), func(t *testing.T) {
			eachStore(t, func(t *testing.T, s store.Store) {
				bad := mustIngest(t, s, "ERA.835", storetest.Fixture(t, fixture))
				if bad.Count(inbox.Rejected) != 1 || len(bad.AckKeys) != 1 {
					t.Fatalf("bad file: %+v %v", bad.Sets, bad.AckKeys)
				}
				fixed := mustIngest(t, s, "ERA.835", canonical(t))
				if fixed.Count(inbox.Processed) != 1 || len(fixed.Sets[0].EffectKeys) != 1 {
					t.Fatalf("corrected file: %+v, want processed with its payment", fixed.Sets)
				}
				if len(fixed.AckKeys) != 1 || fixed.AckKeys[0] == bad.AckKeys[0] {
					t.Fatalf("999 of the corrected file: %v (bad file's acknowledgment %v)", fixed.AckKeys, bad.AckKeys)
				}
				for _, a := range flat(deliver(t, s, "acks")) {
					if a.EffectKey == fixed.AckKeys[0] && !strings.Contains(ackX12(t, a), "AK9*A*1*1*1~") {
						t.Errorf("the corrected file's 999 does not accept it:\n%s", ackX12(t, a))
					}
				}
				if c, _ := s.Counts(context.Background()); c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 {
					t.Errorf("inbox %v", c.Inbox)
				}
			})
		})
	}
}

// otherControl returns the canonical 835 under interchange and group
// control number ctl.
func otherControl(data []byte, ctl string) []byte {
	d := bytes.ReplaceAll(data, []byte("000000101"), []byte("000000"+ctl))
	d = bytes.Replace(d, []byte("*101*X*"), []byte("*"+ctl+"*X*"), 1)
	return bytes.Replace(d, []byte("GE*1*101"), []byte("GE*1*"+ctl), 1)
}

// TestSamePaymentOtherAmountIsConflict: two 835s with the same payment
// number (payer TRN03, trace TRN02) and different amounts. The second is a
// conflict — recorded, shown by reconcile — not a business duplicate, and
// the first payment stands. A regenerated copy of the first under new
// control numbers is still a business duplicate.
func TestSamePaymentOtherAmountIsConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		first := mustIngest(t, s, "a.835", canonical(t))
		if first.Count(inbox.Processed) != 1 {
			t.Fatalf("first: %+v", first.Sets)
		}
		other := bytes.Replace(otherControl(canonical(t), "303"), []byte("BPR*I*150.00"), []byte("BPR*I*175.00"), 1)
		r := mustIngest(t, s, "b.835", other)
		if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 ||
			!slices.Equal(o.ConflictKeys, []string{"payment:1512345678:EFT0001"}) {
			t.Fatalf("same payment number, other amount: %+v, want a conflict", r.Sets)
		}
		if regen := mustIngest(t, s, "c.835", otherControl(canonical(t), "404")); regen.Count(inbox.BusinessDuplicate) != 1 {
			t.Errorf("regenerated under new control numbers: %+v, want a business duplicate", regen.Sets)
		}
		payments := flat(deliver(t, s, "ledger"))
		if len(payments) != 1 || !strings.Contains(string(payments[0].Payload), `"amount": "150.00"`) &&
			!strings.Contains(string(payments[0].Payload), `"amount":"150.00"`) {
			t.Errorf("payments delivered: %d, want the first one alone", len(payments))
		}
		c, _ := s.Counts(context.Background())
		if c.Sightings["effect_conflict"] != 1 || c.Sightings["business_duplicate"] != 1 || c.Inbox["conflict"] != 1 {
			t.Errorf("counts %+v", c)
		}
		rep, err := reconcile.Run(context.Background(), s, t0.Add(-time.Hour), time.Hour, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Conflicts) != 1 || rep.Conflicts[0].Kind != "effect_conflict" ||
			rep.Conflicts[0].Key != "payment:1512345678:EFT0001" || rep.Conflicts[0].Path != "b.835" ||
			rep.Payers[0].Parsed != 1 || rep.Divergent {
			t.Errorf("reconcile: %+v", rep)
		}
		var out bytes.Buffer
		rep.Print(&out)
		if !strings.Contains(out.String(), "CONFLICTS") || !strings.Contains(out.String(), "payment:1512345678:EFT0001") {
			t.Errorf("printed report:\n%s", out.String())
		}
	})
}

func claims(c x12gen.Claims) []byte {
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// claimFreq returns the frequency code of a claim.received row.
func claimFreq(t *testing.T, r outbox.Row) string {
	var ev process.ClaimEvent
	if err := json.Unmarshal(r.Payload, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.Frequency
}

// TestRebatchedClaimIsBusinessDuplicate: 837 claims are keyed by their
// business identity (sender, receiver, CLM01, CLM05-3) and content,
// digested. The same claims re-batched under new control numbers post
// nothing; the same identity with other content (a corrected claim re-sent
// under its CLM01) is a new effect delivered after the first; no key holds
// CLM01 in clear.
func TestRebatchedClaimIsBusinessDuplicate(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		orig := mustIngest(t, s, "claims-1.x12", claims(x12gen.Claims{Control: 1, Claims: 2, IDPrefix: "PCN-"}))
		if orig.Count(inbox.Processed) != 1 || len(orig.Sets[0].EffectKeys) != 2 {
			t.Fatalf("original: %+v", orig.Sets)
		}
		rebatched := mustIngest(t, s, "claims-2.x12", claims(x12gen.Claims{Control: 2, Claims: 2, IDPrefix: "PCN-"}))
		if rebatched.Count(inbox.BusinessDuplicate) != 1 {
			t.Errorf("re-batched under new control numbers: %+v, want a business duplicate", rebatched.Sets)
		}
		changed := bytes.Replace(claims(x12gen.Claims{Control: 3, Claims: 2, IDPrefix: "PCN-"}),
			[]byte("CLM*PCN-1*150.00"), []byte("CLM*PCN-1*175.00"), 1)
		r := mustIngest(t, s, "claims-3.x12", changed)
		if o := r.Sets[0]; o.Outcome != inbox.Processed || len(o.EffectKeys) != 1 || len(o.ConflictKeys) != 0 {
			t.Errorf("same claim identity, other charge: %+v, want the corrected claim alone posted", r.Sets)
		}
		rounds := deliver(t, s, "ledger")
		rows := flat(rounds)
		if len(rows) != 3 || len(rounds) != 2 || rounds[1][0].EffectKey != r.Sets[0].EffectKeys[0] ||
			rounds[1][0].OrderingKey != rounds[0][0].OrderingKey && rounds[1][0].OrderingKey != rounds[0][1].OrderingKey {
			t.Errorf("%d claims in %d rounds, want 3, the corrected one after its original", len(rows), len(rounds))
		}
		for _, row := range rows {
			if strings.Contains(row.EffectKey+row.OrderingKey, "PCN-") {
				t.Errorf("CLM01 in clear in a key: %s %s", row.EffectKey, row.OrderingKey)
			}
		}
	})
}

// TestReplacementAndVoidFollowTheOriginal: a replacement (frequency 7) and
// a void (8) of a claim are new effects on the original's ordering key,
// delivered after it.
func TestReplacementAndVoidFollowTheOriginal(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		var keys []string
		for i, freq := range []string{"1", "7", "8"} {
			r := mustIngest(t, s, "claims-"+freq+".x12", claims(x12gen.Claims{Control: 10 + i, Claims: 2,
				IDPrefix: "PCN-", Frequency: freq}))
			if r.Count(inbox.Processed) != 1 || len(r.Sets[0].EffectKeys) != 2 {
				t.Fatalf("frequency %s: %+v, want two new claims", freq, r.Sets)
			}
			keys = append(keys, r.Sets[0].EffectKeys...)
		}
		if u := slices.Compact(slices.Sorted(slices.Values(keys))); len(u) != 6 {
			t.Errorf("effect keys %v, want six distinct", keys)
		}
		batches := deliver(t, s, "ledger")
		if len(batches) != 3 {
			t.Fatalf("%d delivery rounds, want 3 (original, replacement, void)", len(batches))
		}
		for i, want := range []string{"1", "7", "8"} {
			if len(batches[i]) != 2 || claimFreq(t, batches[i][0]) != want || claimFreq(t, batches[i][1]) != want {
				t.Errorf("round %d: %d rows, want the two claims of frequency %s", i, len(batches[i]), want)
			}
		}
		if batches[0][0].OrderingKey != batches[1][0].OrderingKey || batches[0][0].OrderingKey == batches[0][1].OrderingKey {
			t.Errorf("ordering keys: %s %s %s", batches[0][0].OrderingKey, batches[1][0].OrderingKey, batches[0][1].OrderingKey)
		}
	})
}

// TestCorrectionsOfAClaimArePostedInOrder: after a rejection a provider
// re-sends a corrected claim under its CLM01, then replaces it twice: each
// is a claim of its own, posted once, in the order received.
func TestCorrectionsOfAClaimArePostedInOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		file := func(control int, freq, charge string) []byte {
			b := claims(x12gen.Claims{Control: control, Claims: 1, IDPrefix: "PCN-", Frequency: freq})
			return bytes.Replace(b, []byte("CLM*PCN-1*150.00"), []byte("CLM*PCN-1*"+charge), 1)
		}
		var keys []string
		for i, f := range []struct{ freq, charge string }{{"1", "150.00"}, {"1", "160.00"}, {"7", "170.00"}, {"7", "180.00"}} {
			r := mustIngest(t, s, fmt.Sprintf("claims-%d.x12", i), file(20+i, f.freq, f.charge))
			if r.Count(inbox.Processed) != 1 || len(r.Sets[0].EffectKeys) != 1 {
				t.Fatalf("claim %d (frequency %s, charge %s): %+v, want it posted", i, f.freq, f.charge, r.Sets)
			}
			keys = append(keys, r.Sets[0].EffectKeys[0])
		}
		// The same correction again is a business duplicate.
		if again := mustIngest(t, s, "claims-again.x12", file(30, "7", "180.00")); again.Count(inbox.BusinessDuplicate) != 1 {
			t.Errorf("the last correction re-batched: %+v, want a business duplicate", again.Sets)
		}
		rounds := deliver(t, s, "ledger")
		if len(rounds) != 4 {
			t.Fatalf("%d rounds, want the four claims one after another", len(rounds))
		}
		for i, round := range rounds {
			if len(round) != 1 || round[0].EffectKey != keys[i] {
				t.Errorf("round %d delivered %d rows, want claim %d", i, len(round), i)
			}
		}
	})
}

// TestRegeneratedRemittanceOnAnotherDayIsBusinessDuplicate: a payer
// regenerates a remittance under new control numbers with a new
// production date (DTM*405): the same payment, a business duplicate, not
// a conflict.
func TestRegeneratedRemittanceOnAnotherDayIsBusinessDuplicate(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		remit := func(control int) []byte {
			var b bytes.Buffer
			if _, err := (x12gen.Remit{Control: control, Trace: "REGEN"}).Write(&b); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}
		if first := mustIngest(t, s, "a.835", remit(1)); first.Count(inbox.Processed) != 1 {
			t.Fatalf("first: %+v", first.Sets)
		}
		later := bytes.Replace(remit(2), []byte("DTM*405*20261128"), []byte("DTM*405*20261130"), 1)
		if bytes.Equal(later, remit(2)) {
			t.Fatal("the generator wrote no production date")
		}
		r := mustIngest(t, s, "b.835", later)
		if r.Count(inbox.BusinessDuplicate) != 1 {
			t.Errorf("regenerated on another day: %+v, want a business duplicate", r.Sets)
		}
		if c, _ := s.Counts(context.Background()); c.Sightings["effect_conflict"] != 0 {
			t.Errorf("counts %+v, want no conflict", c)
		}
	})
}

// failingNumbers fails its first fail control number requests.
type failingNumbers struct {
	store.Store
	fail int
}

func (f *failingNumbers) NextControlNumber(ctx context.Context, sender string) (int64, error) {
	if f.fail > 0 {
		f.fail--
		return 0, fmt.Errorf("control number: %w", context.DeadlineExceeded)
	}
	return f.Store.NextControlNumber(ctx, sender)
}

// TestUnreadableFileUnansweredIsNotRecorded: a file that is not X12, from
// a source whose ids are configured, is answered with a TA1 (022). When
// the TA1's control number cannot be taken, the ingest fails and records
// nothing, so the next attempt records the rejection with its TA1; before,
// the file was recorded rejected without its TA1, and every later arrival
// of it was a duplicate: the partner was never answered.
func TestUnreadableFileUnansweredIsNotRecorded(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		data := storetest.Fixture(t, "not_x12_text.txt")
		opts := storetest.Options(t, s)
		opts.Ack = ack.Options{Us: ack.Party{Qualifier: "ZZ", ID: "RIVERSIDE"},
			Them: ack.Party{Qualifier: "ZZ", ID: "ACMEHP"}}
		info := inbox.FileInfo{Source: "test", Path: "note.txt", Size: int64(len(data)), MTime: t0,
			SHA256: "sha-note", CorrelationID: "corr-note", Now: t0}
		opts.Store = &failingNumbers{Store: s, fail: 1}
		if _, err := inbox.Ingest(ctx, opts, info, bytes.NewReader(data)); err == nil {
			t.Fatal("ingested without its TA1")
		}
		if c, err := s.Counts(ctx); err != nil || len(c.Inbox)+len(c.Outbox)+len(c.Files) != 0 {
			t.Fatalf("a failed ingest recorded %+v (%v)", c, err)
		}
		r, err := inbox.Ingest(ctx, opts, info, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if r.Count(inbox.Rejected) != 1 || len(r.AckKeys) != 1 || !strings.HasPrefix(r.AckKeys[0], "ta1:sha256:") {
			t.Errorf("again: %+v, acknowledgments %v", r.Sets, r.AckKeys)
		}
		// Without the ids there is no TA1 to send, and nothing fails.
		opts.Ack = ack.Options{}
		opts.Store = &failingNumbers{Store: s, fail: 1}
		info.Path, info.CorrelationID = "note2.txt", "corr-note2"
		if r, err := inbox.Ingest(ctx, opts, info, bytes.NewReader(data)); err != nil || len(r.AckKeys) != 0 {
			t.Errorf("without ids: %v, acknowledgments %v", err, r)
		}
	})
}
