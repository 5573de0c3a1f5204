package ack

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12"
)

func TestMemoryControlNumbersUniqueAndIncreasing(t *testing.T) {
	cn := &MemoryControlNumbers{Start: 41}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for i := 0; i < 200; i++ {
				n, err := cn.Next(context.Background(), "ZZ:US")
				if err != nil {
					t.Error(err)
					return
				}
				if n <= last {
					t.Errorf("%d after %d", n, last)
				}
				last = n
				mu.Lock()
				if seen[n] {
					t.Errorf("%d handed out twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 1600 || !seen[41] || !seen[1640] {
		t.Errorf("%d numbers, 41..1640 expected", len(seen))
	}
	if n, _ := cn.Next(context.Background(), "ZZ:OTHER"); n != 41 {
		t.Errorf("another sender starts at %d", n)
	}
}

func TestTA1ForUnreadableFile(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC) }
	if _, err := BuildTA1Unreadable(context.Background(), Party{}, Party{}, &MemoryControlNumbers{}, Options{}); err == nil {
		t.Error("built a TA1 without ids")
	}
	x, err := BuildTA1Unreadable(context.Background(), Party{Qualifier: "ZZ", ID: "RIVERSIDE"},
		Party{Qualifier: "ZZ", ID: "ACMEHP"}, &MemoryControlNumbers{Start: 7}, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	f, err := envelope.Parse(strings.NewReader(string(x)), envelope.Options{})
	if err != nil || !f.Valid() {
		t.Fatalf("TA1 not valid X12: %v %v\n%s", err, f.AllErrors(), x)
	}
	ix := f.Interchanges[0]
	if len(ix.TA1) != 1 || ix.TA1[0].AckCode != "R" || ix.TA1[0].NoteCode != "022" || ix.ControlNumber != "000000007" ||
		ix.SenderID != "RIVERSIDE" || ix.ReceiverID != "ACMEHP" || ix.Date != "261130" {
		t.Errorf("TA1 interchange %+v", ix)
	}
}

// TestTA1RejectsInterchangeDateAndTime: an interchange whose ISA09 and
// ISA10 are not a real date and time, asking for a TA1, gets TA104 R with
// TA105 014 (the first of its errors); a duplicate ISA13 gets 025.
func TestTA1RejectsInterchangeDateAndTime(t *testing.T) {
	for _, c := range []struct {
		isa09, isa10, isa13b, note string
	}{
		{"260230", "0930", "000000302", "014"},
		{"261130", "2460", "000000302", "015"},
		{"261130", "0930", "000000301", "025"},
	} {
		x := "ISA*00*          *00*          *ZZ*ACMEHP         *ZZ*RIVERSIDE      *261130*0930*^*00501*000000301*1*P*:~IEA*0*000000301~" +
			"ISA*00*          *00*          *ZZ*ACMEHP         *ZZ*RIVERSIDE      *" + c.isa09 + "*" + c.isa10 + "*^*00501*" + c.isa13b + "*1*P*:~IEA*0*" + c.isa13b + "~"
		f, err := envelope.Parse(strings.NewReader(x), envelope.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ix := f.Interchanges[1]
		if !WantsTA1(ix, false) || VerdictTA1(ix) != "R"+c.note {
			t.Errorf("%+v: verdict %s, errors %v", c, VerdictTA1(ix), ix.Errors)
			continue
		}
		ta1, err := BuildTA1(context.Background(), ix, &MemoryControlNumbers{Start: 5}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		back, err := envelope.Parse(strings.NewReader(string(ta1)), envelope.Options{})
		if err != nil || len(back.Interchanges) != 1 || len(back.Interchanges[0].TA1) != 1 {
			t.Fatalf("TA1 %q: %v", ta1, err)
		}
		if got := back.Interchanges[0].TA1[0]; got.AckCode != "R" || got.NoteCode != c.note {
			t.Errorf("%+v: TA1 %+v", c, got)
		}
	}
}

// TestAcknowledgmentDelimitersAvoidReceivedValues: a partner writing with
// "|" and ">" may put a "*" or a "~" in an id or a control number. The 999
// and the TA1 repeat those values, so they must be written with delimiters
// that occur in none of them, or the partner reads a GS with an extra
// element (GS03 "ACME" and GS04 "HP") and a broken AK2. Before, both were
// written in * ^ : ~ whatever the values held.
func TestAcknowledgmentDelimitersAvoidReceivedValues(t *testing.T) {
	in := "ISA|00|          |00|          |ZZ|ACME*HP        |ZZ|RIVER~SIDE     |261130|0930|^|00501|000000101|1|P|>\n" +
		"GS|HP|ACME*HP|RIVER:SIDE|20261130|0930|101|X|005010X221A1\n" +
		"ST|835|00*1\nBPR|I|1|C|CHK\nSE|3|00*1\n" +
		"GE|1|101\nIEA|1|000000101\n"
	rd := envelope.NewReader(strings.NewReader(in), envelope.Options{})
	var ix *envelope.Interchange
	var g *envelope.Group
	var sets []SetResult
	for {
		k, err := rd.Next()
		if err != nil {
			break
		}
		switch k {
		case envelope.KindSet:
			sets = append(sets, SetResultOf(rd.Set(), nil))
		case envelope.KindGroupEnd:
			g = rd.Group()
		case envelope.KindInterchangeEnd:
			ix = rd.Interchange()
		}
	}
	if ix == nil || g == nil || len(sets) != 1 || !ix.Valid() {
		t.Fatalf("fixture not read as one valid interchange")
	}
	now := func() time.Time { return time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC) }
	cn := &MemoryControlNumbers{}
	x999, err := Build999(context.Background(), ix, g, sets, cn, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	xta1, err := BuildTA1(context.Background(), ix, cn, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range [][]byte{x999, xta1} {
		var segs []envelope.Segment
		back := envelope.NewReader(strings.NewReader(string(x)), envelope.Options{
			Trace: func(s envelope.Segment) { segs = append(segs, s.Clone()) }})
		for {
			if _, err := back.Next(); err != nil {
				break
			}
		}
		f, err := envelope.Parse(strings.NewReader(string(x)), envelope.Options{})
		if err != nil || !f.Valid() {
			t.Fatalf("acknowledgment not valid X12: %v %v\n%s", err, f.AllErrors(), x)
		}
		aix := f.Interchanges[0]
		if aix.SenderID != "RIVER~SIDE" || aix.ReceiverID != "ACME*HP" {
			t.Errorf("ISA06 %q ISA08 %q\n%s", aix.SenderID, aix.ReceiverID, x)
		}
		for _, s := range segs {
			switch s.ID() {
			case "GS":
				if s.Str(2) != "RIVER:SIDE" || s.Str(3) != "ACME*HP" || s.Str(4) != "20261130" {
					t.Errorf("GS02 %q GS03 %q GS04 %q\n%s", s.Str(2), s.Str(3), s.Str(4), x)
				}
			case "AK2":
				if s.Str(1) != "835" || s.Str(2) != "00*1" {
					t.Errorf("AK201 %q AK202 %q\n%s", s.Str(1), s.Str(2), x)
				}
			case "TA1":
				if s.Str(1) != "000000101" || s.Str(4) != "A" || s.Str(5) != "000" {
					t.Errorf("TA1 %q\n%s", s.Raw(), x)
				}
			}
		}
	}
}

// TestAcknowledgmentDelimitersCanonicalWhenValuesAllow: values free of
// * ^ : ~ keep the canonical delimiters.
func TestAcknowledgmentDelimitersCanonicalWhenValuesAllow(t *testing.T) {
	if d := delimitersFor([]string{"ZZ", "ACMEHP", "P"}, []string{"835", "0001", "005010X221A1"}); d != envelope.Canonical {
		t.Errorf("delimiters %v, want the canonical ones", d)
	}
	d := delimitersFor([]string{"A*B", "C|D", "E^F", "G:H", "I~J"})
	if d.Element != '!' || d.Repetition != '{' || d.Component != '>' || d.Segment != '\'' {
		t.Errorf("delimiters %v", d)
	}
}

// TestAK9IsEWhenSetsAreAcceptedWithErrors: a group whose sets are all
// accepted, some with errors noted (IK5 E), is answered AK901 E ("accepted,
// but errors were noted"), not A. Before, it was A: the E branch looked
// only at envelope errors, which always reject their set.
func TestAK9IsEWhenSetsAreAcceptedWithErrors(t *testing.T) {
	g := &envelope.Group{FunctionalID: "HP", ControlNumber: "101", Version: "005010X221A1", DeclaredSets: -1}
	clean := SetResult{Type: "835", ControlNumber: "0001"}
	noted := SetResult{Type: "835", ControlNumber: "0002", Problems: []x12.Problem{{SegmentID: "BPR", Position: 2,
		SegmentCode: "8", Element: 1, ElementRef: "305", ElementCode: "1"}}}
	rejected := SetResult{Type: "835", ControlNumber: "0003", Problems: []x12.Problem{{SegmentID: "TRN", Position: 3,
		SegmentCode: "8", Element: 2, ElementRef: "127", ElementCode: "1", Reject: true}}}
	for _, c := range []struct {
		sets []SetResult
		ak9  string
	}{
		{[]SetResult{clean}, "AK9*A*1*1*1"},
		{[]SetResult{noted}, "AK9*E*1*1*1"},
		{[]SetResult{clean, noted}, "AK9*E*2*2*2"},
		{[]SetResult{clean, noted, rejected}, "AK9*P*3*3*2"},
		{[]SetResult{rejected}, "AK9*R*1*1*0"},
	} {
		v := Verdict999(g, c.sets)
		if lines := strings.Split(strings.TrimSpace(v), "\n"); lines[len(lines)-1] != c.ak9 {
			t.Errorf("%d sets: %s, want %s\n%s", len(c.sets), lines[len(lines)-1], c.ak9, v)
		}
	}
}
