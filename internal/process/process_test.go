package process

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

var fixedNow = func() time.Time { return time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC) }

type result struct {
	file  *envelope.File
	sets  []*Set
	acks  []Effect
	items []Item
}

func run(t *testing.T, data []byte) result {
	t.Helper()
	var r result
	f, err := File(context.Background(), bytes.NewReader(data),
		Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 900}, Ack: ack.Options{Now: fixedNow}},
		func(it Item) error {
			r.items = append(r.items, it)
			if it.Set != nil {
				r.sets = append(r.sets, it.Set)
			}
			if it.Ack != nil {
				r.acks = append(r.acks, *it.Ack)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	// File keeps nothing of the tree; the tests read the received
	// envelope from Parse, whose file-level results File's equal.
	tree, err := envelope.Parse(bytes.NewReader(data), envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.X12 != tree.X12 || f.Key != tree.Key || len(f.Errors) != len(tree.Errors) ||
		!maps.Equal(f.WarningCounts, tree.WarningCounts) || len(f.Interchanges) != 0 {
		t.Fatalf("File's results %v %q %d errors %v (%d interchanges kept), Parse's %v %q %d %v", f.X12, f.Key,
			len(f.Errors), f.WarningCounts, len(f.Interchanges), tree.X12, tree.Key, len(tree.Errors), tree.WarningCounts)
	}
	r.file = tree
	return r
}

func x12Of(t *testing.T, e Effect) string {
	t.Helper()
	var ev AckEvent
	if err := json.Unmarshal(e.Payload, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.X12
}

// segments returns the segments of an X12 text with the given id, split
// into elements, after checking the text is valid X12.
func segments(t *testing.T, text, id string) [][]string {
	t.Helper()
	var out [][]string
	f, err := envelope.Parse(strings.NewReader(text), envelope.Options{Trace: func(s envelope.Segment) {
		if s.ID() == id {
			var el []string
			for _, e := range s.Elements() {
				el = append(el, string(e))
			}
			out = append(out, el)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Valid() {
		t.Fatalf("acknowledgment is not valid X12: %v\n%s", f.AllErrors(), text)
	}
	return out
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "envelope", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// threeClaims builds a group of three 837 sets from a corpus 837: the
// first valid, the second without its claim charge, the third with a wrong
// SE01.
func threeClaims(t *testing.T) []byte {
	dir := testenv.Corpus(t)
	data, err := os.ReadFile(filepath.Join(dir, "linuxforhealth-x12/demo.example1.837"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	st, ge := strings.Index(text, "ST*837*"), strings.Index(text, "GE*")
	set := text[st:ge]
	ctl := set[len("ST*837*") : strings.Index(set[len("ST*837*"):], "*")+len("ST*837*")]
	se := strings.Index(set, "SE*")
	mk := func(n string) string {
		return strings.Replace(set[:se], "ST*837*"+ctl+"*", "ST*837*"+n+"*", 1) +
			strings.Replace(set[se:], "*"+ctl+"~", "*"+n+"~", 1)
	}
	second := strings.Replace(mk("0002"), "CLM*26463774*100.00*", "CLM*26463774**", 1)
	third := mk("0003")
	i := strings.Index(third, "SE*")
	third = third[:i] + "SE*99*0003~" + third[strings.Index(third[i:], "~")+i+1:]
	body := mk("0001") + second + third
	gsEnd := text[ge:]
	gsEnd = "GE*3*" + gsEnd[strings.Index(gsEnd[3:], "*")+4:]
	return []byte(text[:st] + body + gsEnd)
}

// TestGroupOfThree837s: one accepted and two rejected sets give the 999
// of the published TR3 example's shape: AK2/IK3/IK4/IK5 per set and
// AK9*P*3*3*1; the 999 reads back as valid X12.
func TestGroupOfThree837s(t *testing.T) {
	r := run(t, threeClaims(t))
	if len(r.sets) != 3 {
		t.Fatalf("%d sets", len(r.sets))
	}
	if r.sets[0].Status != Processed || r.sets[1].Status != Rejected || r.sets[2].Status != Rejected {
		t.Fatalf("statuses %s %s %s (%s; %s; %s)", r.sets[0].Status, r.sets[1].Status, r.sets[2].Status, r.sets[0].Reason, r.sets[1].Reason, r.sets[2].Reason)
	}
	if len(r.sets[0].Effects) != 1 || r.sets[0].Effects[0].Kind != KindClaim || len(r.sets[1].Effects)+len(r.sets[2].Effects) != 0 {
		t.Errorf("effects: %d %d %d", len(r.sets[0].Effects), len(r.sets[1].Effects), len(r.sets[2].Effects))
	}
	// The source interchange asks for a TA1 (ISA14 = 1): the 999, then TA1 A.
	if len(r.acks) != 2 || r.acks[0].Kind != KindAck999 || r.acks[1].Kind != KindAckTA1 {
		t.Fatalf("%d acks", len(r.acks))
	}
	if ta1 := segments(t, x12Of(t, r.acks[1]), "TA1")[0]; ta1[4] != "A" || ta1[5] != "000" {
		t.Errorf("TA1 %v", ta1)
	}
	text := x12Of(t, r.acks[0])
	ak9 := segments(t, text, "AK9")
	if len(ak9) != 1 || strings.Join(ak9[0], "*") != "AK9*P*3*3*1" {
		t.Errorf("AK9 = %v\n%s", ak9, text)
	}
	ik5 := segments(t, text, "IK5")
	if len(ik5) != 3 || ik5[0][1] != "A" || ik5[1][1] != "R" || ik5[2][1] != "R" || ik5[2][2] != "4" {
		t.Errorf("IK5 = %v", ik5)
	}
	ik3 := segments(t, text, "IK3")
	ik4 := segments(t, text, "IK4")
	if len(ik3) != 1 || ik3[0][1] != "CLM" || ik3[0][4] != "8" || len(ik4) != 1 || strings.Join(ik4[0][1:], "*") != "2*782*1" {
		t.Errorf("IK3 = %v IK4 = %v", ik3, ik4)
	}
	if ctx := segments(t, text, "CTX"); len(ctx) != 1 || ctx[0][1] != "CLM01:26463774" {
		t.Errorf("CTX = %v", ctx)
	}
	ak1 := segments(t, text, "AK1")
	if len(ak1) != 1 || ak1[0][1] != "HC" || ak1[0][3] != "005010X222A2" {
		t.Errorf("AK1 = %v", ak1)
	}
	isa := segments(t, text, "ISA")[0]
	if strings.TrimSpace(isa[6]) != strings.TrimSpace(r.file.Interchanges[0].ReceiverID) || isa[13] != "000000900" {
		t.Errorf("ISA ids/control: %v", isa)
	}
}

// TestEveryAckReadsBackValid runs the whole public corpus: every 999 and
// TA1 ediwatch builds is valid X12 to its own reader, and every 999's AK9
// counts equal the received group's.
func TestEveryAckReadsBackValid(t *testing.T) {
	dir := testenv.Corpus(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	n999, nTA1 := 0, 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, data)
		var groups []*envelope.Group
		for _, ix := range r.file.Interchanges {
			groups = append(groups, ix.Groups...)
		}
		// Items come in file order: a group's sets, then its 999.
		gi, received, accepted := 0, 0, 0
		for _, it := range r.items {
			if it.Set != nil {
				received++
				if it.Set.Status == Processed {
					accepted++
				}
				continue
			}
			if it.Received != nil {
				continue // a received TA1's event, not ours to check
			}
			a := *it.Ack
			text := x12Of(t, a)
			switch a.Kind {
			case KindAck999:
				n999++
				for gi < len(groups) && !strings.HasPrefix(a.Key, "ack999:"+groups[gi].Key()+":") {
					gi++
				}
				if gi == len(groups) {
					t.Fatalf("%s: 999 for unknown group %s", path, a.Key)
				}
				g := groups[gi]
				gi++
				ak9 := segments(t, text, "AK9")[0]
				if ak9[3] != itoa(g.SetCount) || ak9[3] != itoa(received) {
					t.Errorf("%s: AK903 %s, group received %d", path, ak9[3], g.SetCount)
				}
				if ak9[1] != "R" && ak9[4] != itoa(accepted) {
					t.Errorf("%s: AK904 %s, accepted %d", path, ak9[4], accepted)
				}
				if len(segments(t, text, "AK2")) != g.SetCount {
					t.Errorf("%s: AK2 count", path)
				}
				received, accepted = 0, 0
			case KindAckTA1:
				nTA1++
				if len(segments(t, text, "TA1")) != 1 {
					t.Errorf("%s: TA1 missing", path)
				}
			}
		}
	}
	if n999 < 30 || nTA1 < 5 {
		t.Errorf("only %d 999s and %d TA1s over the corpus", n999, nTA1)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestInterchangeRejectedSendsTA1Only(t *testing.T) {
	r := run(t, readFixture(t, "err_iea02_mismatch.x12"))
	if len(r.sets) != 1 || r.sets[0].Status != Rejected || len(r.sets[0].Effects) != 0 ||
		!strings.Contains(r.sets[0].Reason, "iea02_mismatch") {
		t.Fatalf("sets %+v", r.sets[0])
	}
	if len(r.acks) != 1 || r.acks[0].Kind != KindAckTA1 || r.acks[0].Key != "ta1:x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000101:R001" {
		t.Fatalf("acks %+v", r.acks)
	}
	ta1 := segments(t, x12Of(t, r.acks[0]), "TA1")[0]
	if strings.Join(ta1[1:], "*") != "000000101*261130*0930*R*001" {
		t.Errorf("TA1 %v", ta1)
	}
}

func TestAckRequestedGetsTA1Accepted(t *testing.T) {
	data := bytes.Replace(readFixture(t, "835_canonical.x12"), []byte("*000000101*0*P*:~"), []byte("*000000101*1*P*:~"), 1)
	r := run(t, data)
	kinds := []string{}
	for _, a := range r.acks {
		kinds = append(kinds, a.Kind)
	}
	if !slices.Equal(kinds, []string{KindAck999, KindAckTA1}) {
		t.Fatalf("acks %v", kinds)
	}
	ta1 := segments(t, x12Of(t, r.acks[1]), "TA1")[0]
	if ta1[4] != "A" || ta1[5] != "000" {
		t.Errorf("TA1 %v", ta1)
	}
}

func TestRegenerated835PostsTheSamePayment(t *testing.T) {
	a := run(t, readFixture(t, "835_canonical.x12"))
	b := run(t, readFixture(t, "835_regenerated.x12"))
	if a.sets[0].Key == b.sets[0].Key {
		t.Fatal("regenerated file has the same envelope key")
	}
	if a.sets[0].Effects[0].Key != "payment:1512345678:EFT0001" || a.sets[0].Effects[0].Key != b.sets[0].Effects[0].Key {
		t.Errorf("payment keys %s vs %s", a.sets[0].Effects[0].Key, b.sets[0].Effects[0].Key)
	}
}

// TestRejectedSetDoesNotStopTheFile: a set missing its BPR is rejected and
// posts nothing; the next set of the file is processed.
func TestRejectedSetDoesNotStopTheFile(t *testing.T) {
	good := string(readFixture(t, "835_canonical.x12"))
	st, se := strings.Index(good, "ST*835*0001"), strings.Index(good, "GE*")
	set := good[st:se]
	bad := strings.NewReplacer("ST*835*0001", "ST*835*0002", "SE*19*0001", "SE*18*0002").Replace(set)
	bad = bad[:strings.Index(bad, "BPR*")] + bad[strings.Index(bad, "TRN*"):]
	second := strings.NewReplacer("ST*835*0001", "ST*835*0003", "SE*19*0001", "SE*19*0003", "EFT0001", "EFT0003").Replace(set)
	text := good[:se] + bad + second + strings.Replace(good[se:], "GE*1*", "GE*3*", 1)
	r := run(t, []byte(text))
	if len(r.sets) != 3 || r.sets[0].Status != Processed || r.sets[1].Status != Rejected || r.sets[2].Status != Processed {
		t.Fatalf("sets %v", r.sets)
	}
	if len(r.sets[1].Effects) != 0 || len(r.sets[2].Effects) != 1 || r.sets[2].Effects[0].Key != "payment:1512345678:EFT0003" {
		t.Errorf("effects %v %v", r.sets[1].Effects, r.sets[2].Effects)
	}
	if ak9 := segments(t, x12Of(t, r.acks[0]), "AK9")[0]; strings.Join(ak9, "*") != "AK9*P*3*3*2" {
		t.Errorf("AK9 %v", ak9)
	}
	if ik3 := segments(t, x12Of(t, r.acks[0]), "IK3"); len(ik3) != 1 || ik3[0][1] != "BPR" || ik3[0][4] != "3" {
		t.Errorf("IK3 %v", ik3)
	}
}

func TestAcksAreNeverAcknowledged(t *testing.T) {
	dir := testenv.Corpus(t)
	for _, name := range []string{"staedi/simple999.edi", "oopfactory-x12parser/TechnicalAcknowledgment_SampleFromJeffN825.txt"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if r := run(t, data); len(r.acks) != 0 {
			t.Errorf("%s: acknowledged an acknowledgment: %v", name, r.acks)
		}
	}
}

// TestCorrectedResendIsAcknowledged: a group rejected once and re-sent
// corrected under the same control numbers gets its own 999; the same
// content re-sent gets the same 999 key, so it is acknowledged once.
func TestCorrectedResendIsAcknowledged(t *testing.T) {
	bad := run(t, readFixture(t, "err_se01_count.x12"))
	good := run(t, readFixture(t, "835_canonical.x12"))
	again := run(t, readFixture(t, "835_crlf.x12"))
	if bad.acks[0].Key == good.acks[0].Key {
		t.Error("the corrected group's 999 shares the rejected one's key")
	}
	if good.acks[0].Key != again.acks[0].Key {
		t.Error("the same group re-sent got another 999 key")
	}
}

// TestCorrectedEnvelopeGetsItsOwnVerdict: a group rejected for its GE01
// and re-sent corrected holds the very same sets; its 999 key differs from
// the rejecting one's (the key carries the verdict), and the effect hashes
// of the payment are equal (its business content is unchanged).
func TestCorrectedEnvelopeGetsItsOwnVerdict(t *testing.T) {
	bad := run(t, readFixture(t, "err_ge01_count.x12"))
	good := run(t, readFixture(t, "835_canonical.x12"))
	if bad.sets[0].ContentHash != good.sets[0].ContentHash {
		t.Fatal("the fixture's set differs from the canonical one")
	}
	if len(bad.acks) != 1 || len(good.acks) != 1 || bad.acks[0].Key == good.acks[0].Key {
		t.Errorf("999 keys: rejected %v, corrected %v", bad.acks, good.acks)
	}
	// The same for a TA1: rejected for its IEA02, then corrected (with
	// ISA14 = 1, so that an accepting TA1 is sent).
	rejected := run(t, readFixture(t, "err_iea02_mismatch.x12")).acks
	accepted := run(t, bytes.Replace(readFixture(t, "835_canonical.x12"),
		[]byte("*000000101*0*P*:~"), []byte("*000000101*1*P*:~"), 1)).acks
	if len(rejected) != 1 || len(accepted) != 2 || accepted[1].Kind != KindAckTA1 || rejected[0].Key == accepted[1].Key {
		t.Errorf("TA1 keys: rejected %v, accepted %v", rejected, accepted)
	}
}

// TestEffectHashIgnoresTheEnvelope: a payment regenerated under new control
// numbers has the same effect hash; another amount has another.
func TestEffectHashIgnoresTheEnvelope(t *testing.T) {
	a := run(t, readFixture(t, "835_canonical.x12")).sets[0].Effects[0]
	b := run(t, readFixture(t, "835_regenerated.x12")).sets[0].Effects[0]
	c := run(t, bytes.Replace(readFixture(t, "835_canonical.x12"), []byte("BPR*I*150.00"), []byte("BPR*I*150.01"), 1)).sets[0].Effects[0]
	if a.Key != b.Key || a.Key != c.Key || len(a.Hash) != 64 {
		t.Fatalf("effects %s %s %s (hash %q)", a.Key, b.Key, c.Key, a.Hash)
	}
	if a.Hash != b.Hash || a.Hash == c.Hash {
		t.Errorf("effect hashes: canonical %s, regenerated %s, other amount %s", a.Hash, b.Hash, c.Hash)
	}
}

// TestEventPayloadsUnchanged: the payload, built around the document's
// JSON (encoded once for the payload and its hash), is the encoding of
// PaymentEvent or ClaimEvent.
func TestEventPayloadsUnchanged(t *testing.T) {
	s := run(t, readFixture(t, "835_canonical.x12")).sets[0]
	want, _ := json.Marshal(PaymentEvent{EnvelopeKey: s.Key, ContentHash: s.ContentHash, Sender: "ZZ:ACMEHP",
		Receiver: "ZZ:RIVERSIDE", Payment: s.Payment})
	if string(s.Effects[0].Payload) != string(want) {
		t.Errorf("payment payload\n%s\nwant\n%s", s.Effects[0].Payload, want)
	}
	var b bytes.Buffer
	x12gen.Claims{Claims: 2}.Write(&b)
	c := run(t, b.Bytes()).sets[0]
	for i, e := range c.Effects {
		want, _ := json.Marshal(ClaimEvent{EnvelopeKey: c.Key, Sender: "ZZ:RIVERSIDE", Receiver: "ZZ:ACMEHP", Claim: c.Claims[i]})
		if string(e.Payload) != string(want) {
			t.Errorf("claim payload\n%s\nwant\n%s", e.Payload, want)
		}
	}
}

// TestOversizeSegmentInASetIsAnsweredInIts999: a segment longer than the
// limit inside a transaction set rejects that set, and its 999 says so in
// the 999's own codes: IK3 with the segment's identifier and position and
// IK304 8, IK5 R 5. Before, IK5 carried "024", a TA105 note code that no
// 999 reader knows as an IK502 code, and no IK3.
func TestOversizeSegmentInASetIsAnsweredInIts999(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "envelope", "testdata", "835_canonical.x12"))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("N3*1 MAIN ST~"), []byte("N3*"+strings.Repeat("A", 100<<10)+"~"), 1)
	var acks []Effect
	_, err = File(context.Background(), bytes.NewReader(data),
		Config{ControlNumbers: &ack.MemoryControlNumbers{}, Ack: ack.Options{Now: fixedNow},
			Envelope: envelope.Options{MaxSegment: 64 << 10}},
		func(it Item) error {
			if it.Ack != nil {
				acks = append(acks, *it.Ack)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(acks) != 1 || acks[0].Kind != KindAck999 {
		t.Fatalf("acks %+v", acks)
	}
	x := x12Of(t, acks[0])
	if !strings.Contains(x, "AK2*835*0001~\nIK3*N3*6**8~\nIK5*R*5~\nAK9*R*1*1*0~") {
		t.Errorf("999:\n%s", x)
	}
}
