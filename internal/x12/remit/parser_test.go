package remit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12/x12test"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// namedSet is one 835 set of the tests below.
type namedSet struct {
	name string
	segs []envelope.Segment
}

// reuseSets returns 835 sets of every shape the tests know: the public
// corpus, the canonical fixture and its edits (imbalances, a debit, PLBs,
// bad amounts and dates, missing segments, lines outside a claim), and
// generated sets from one claim to many claims of many lines, in an order
// where a big set is followed by small ones.
func reuseSets(t *testing.T) []namedSet {
	t.Helper()
	var out []namedSet
	add := func(name string, data []byte) {
		t.Helper()
		ss := x12test.Sets(t, data, "835")
		if len(ss) == 0 {
			t.Fatalf("%s: no 835 set", name)
		}
		for _, segs := range ss {
			out = append(out, namedSet{name, segs})
		}
	}
	gen := func(r x12gen.Remit) []byte {
		var buf bytes.Buffer
		if _, err := r.Write(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	add("generated 40x6", gen(x12gen.Remit{ClaimsPerSet: 40, LinesPerClaim: 6}))
	base := canonical(t)
	add("canonical", []byte(base))
	for _, e := range [][2]string{
		{"SVC*HC:99213:25*200.00*150.00", "SVC*HC:99213:25*200.00*149.00"},
		{"CLP*PCN001*1*200.00*150.00", "CLP*PCN001*1*200.00*151.00"},
		{"BPR*I*150.00*C", "BPR*I*150.00*D"},
		{"SE*19*", "PLB*1234567893*20261231*WO:X1*-5.00*L6:Y2*1.25~SE*20*"},
		{"BPR*I*150.00*C*ACH*CCP*01*999999999*DA*123456*1512345678**01*999988880*DA*98765*20261130~", ""},
		{"TRN*1*EFT0001*1512345678~", ""},
		{"CLP*PCN001*1*200.00*150.00*20.00*12", "CLP*PCN001*1***20.00*12"},
		{"CAS*CO*45*30.00", "CAS*CO*45*30,00"},
		{"SVC*HC:99213:25", "SVC*99213"},
		{"DTM*472*20261101", "DTM*472*20261301"},
		{"LX*1~CLP", "SVC*HC:1*1*1~CAS*CO*1*1~LX*1~CLP"},
		{"SVC*HC:99213:25*", "SVC*HC:99213:25:26:27:28*"},
	} {
		text := strings.Replace(base, e[0], e[1], 1)
		if text == base {
			t.Fatalf("fixture edit %q did not apply", e[0])
		}
		add("canonical edited: "+e[0], []byte(text))
	}
	add("generated 1x1", gen(x12gen.Remit{SetsPerGroup: 2}))
	corpus := x12test.CorpusSets(t, "835")
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range corpus {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		for _, segs := range corpus[name] {
			out = append(out, namedSet{name, segs})
		}
	}
	add("generated 3x2, other delimiters", gen(x12gen.Remit{SetsPerGroup: 3, ClaimsPerSet: 3, LinesPerClaim: 2,
		Element: '|', Component: '>', Repetition: '!', Segment: '\n'}))
	return out
}

// TestReusedParserEqualsFreshParse: a Parser reading set after set, the
// whole list forwards and then backwards (a big set followed by small ones
// and the reverse), returns for each exactly what a fresh Parse returns:
// deeply equal payments and problems, the same JSON, and its Summary is
// that of the fresh payment. Nothing of an earlier set shows in a later
// one.
func TestReusedParserEqualsFreshParse(t *testing.T) {
	sets := reuseSets(t)
	order := slices.Clone(sets)
	slices.Reverse(order)
	order = append(slices.Clone(sets), order...)
	var reused, summaries Parser
	for i, s := range order {
		want, wantProbs := Parse(s.segs)
		got, gotProbs := reused.Parse(s.segs)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("set %d (%s): reused payment differs\n got %+v\nwant %+v", i, s.name, got, want)
		}
		if !reflect.DeepEqual(gotProbs, wantProbs) {
			t.Errorf("set %d (%s): reused problems differ\n got %v\nwant %v", i, s.name, gotProbs, wantProbs)
		}
		wantJSON, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if gotJSON := got.AppendJSON(nil); !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("set %d (%s): reused JSON differs\n got %s\nwant %s", i, s.name, gotJSON, wantJSON)
		}
		if sum, want := summaries.Summary(s.segs), want.Summary(); sum != want {
			t.Errorf("set %d (%s): summary %+v, want %+v", i, s.name, sum, want)
		}
	}
}

// TestReusedParserLeavesFreshResultsAlone: what the package-level Parse
// returned stays as it was while a Parser reads other sets.
func TestReusedParserLeavesFreshResultsAlone(t *testing.T) {
	sets := reuseSets(t)
	var kept [][]byte
	var docs []*Payment
	for _, s := range sets {
		p, _ := Parse(s.segs)
		docs = append(docs, p)
		kept = append(kept, p.AppendJSON(nil))
	}
	var reused Parser
	for range 2 {
		for _, s := range sets {
			reused.Parse(s.segs)
			reused.Summary(s.segs)
		}
	}
	for i, p := range docs {
		if got := p.AppendJSON(nil); !bytes.Equal(got, kept[i]) {
			t.Fatalf("set %d (%s) changed under a reused parser", i, sets[i].name)
		}
	}
}

// TestReusedParserAllocatesAlmostNothing: once a Parser has read a set of
// some size, reading sets of that size again allocates nothing but, now
// and then, a block of dates.
func TestReusedParserAllocatesAlmostNothing(t *testing.T) {
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 2, ClaimsPerSet: 8, LinesPerClaim: 2}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	ss := x12test.Sets(t, buf.Bytes(), "835")
	var p Parser
	p.Parse(ss[0])
	p.Summary(ss[0])
	k := 0
	parse := testing.AllocsPerRun(200, func() { p.Parse(ss[k%2]); k++ })
	summary := testing.AllocsPerRun(200, func() { p.Summary(ss[k%2]); k++ })
	fresh := testing.AllocsPerRun(20, func() { Parse(ss[0]) })
	if parse > 0.2 || summary > 0.2 {
		t.Errorf("a reused parse allocates %.2f times per set, a summary %.2f (a fresh parse %.0f)", parse, summary, fresh)
	}
}

// TestSummaryOutlivesItsSegments: Summary reads the set in place, yet what
// it returns stays as it is when the segments' memory is reused (as a
// Reader reuses it for the next set).
func TestSummaryOutlivesItsSegments(t *testing.T) {
	var p Parser
	for _, s := range reuseSets(t) {
		var buf []byte
		for _, seg := range s.segs {
			buf = append(buf, seg.Raw()...)
		}
		segs := make([]envelope.Segment, len(s.segs))
		at := 0
		for i, seg := range s.segs {
			n := len(seg.Raw())
			segs[i] = envelope.NewSegment(buf[at:at+n:at+n], seg.Delimiters())
			at += n
		}
		want, _ := Parse(s.segs)
		sum := p.Summary(segs)
		for i := range buf {
			buf[i] = 'X'
		}
		if sum != want.Summary() {
			t.Fatalf("%s: summary %+v after its segments were overwritten, want %+v", s.name, sum, want.Summary())
		}
	}
}

// BenchmarkParser reads the sets of a generated file (8 claims a set, as
// in issue 14's 100 MB 835) with a fresh Parse each, with one Parser
// reused, and with the Parser's Summary, and reports each one's
// throughput and allocations, and the speed-up over the fresh parse
// measured in the same run.
func BenchmarkParser(b *testing.B) {
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 200, ClaimsPerSet: 8}).Write(&buf); err != nil {
		b.Fatal(err)
	}
	sets := x12test.Sets(b, buf.Bytes(), "835")
	var freshNs float64
	for _, bc := range []struct {
		name string
		read func(p *Parser, segs []envelope.Segment)
	}{
		{"fresh", func(_ *Parser, segs []envelope.Segment) { Parse(segs) }},
		{"reused", func(p *Parser, segs []envelope.Segment) { p.Parse(segs) }},
		{"summary", func(p *Parser, segs []envelope.Segment) { p.Summary(segs) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(buf.Len()))
			b.ReportAllocs()
			var p Parser
			for b.Loop() {
				for _, segs := range sets {
					bc.read(&p, segs)
				}
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if bc.name == "fresh" {
				freshNs = ns
			} else if freshNs > 0 {
				b.ReportMetric(freshNs/ns, "speedup-vs-fresh")
			}
		})
	}
}
