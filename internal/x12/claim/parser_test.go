package claim

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12/x12test"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// namedSet is one 837 set of the tests below.
type namedSet struct {
	name string
	segs []envelope.Segment
}

// reuseSets returns 837 sets of every shape the tests know: generated sets
// of many claims and of one, the public corpus (professional and
// institutional, patients below subscribers), a set of no claim, and
// edited sets with problems, in an order where big sets are followed by
// small ones.
func reuseSets(t *testing.T) []namedSet {
	t.Helper()
	var out []namedSet
	add := func(name string, data []byte) {
		t.Helper()
		ss := x12test.Sets(t, data, "837")
		if len(ss) == 0 {
			t.Fatalf("%s: no 837 set", name)
		}
		for _, segs := range ss {
			out = append(out, namedSet{name, segs})
		}
	}
	gen := func(c x12gen.Claims) []byte {
		var buf bytes.Buffer
		if err := c.Write(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	add("generated 60", gen(x12gen.Claims{Claims: 60}))
	data, err := os.ReadFile(filepath.Join(testenv.Corpus(t), "linuxforhealth-x12/demo.example1.837"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	add("demo", data)
	for _, e := range [][2]string{
		{"CLM*26463774*100.00*", "CLM*26463774**"},
		{"CLM*26463774*100", "CLM*26463774*1OO"},
		{"SV1*HC:99213*40", "SV1*HC:99213*4O"},
		{"SV1*HC:99213*40", "SV1*99213*40"},
		{"CLM*26463774*", "REF*X*Y~CLM*26463774*"},
	} {
		edited := strings.Replace(text, e[0], e[1], 1)
		if edited == text {
			t.Fatalf("edit %q did not apply", e[0])
		}
		add("demo edited: "+e[0], []byte(edited))
	}
	// No claim at all: the CLM loops cut out.
	if i, j := strings.Index(text, "CLM*"), strings.Index(text, "SE*"); i > 0 && j > i {
		noClaims := text[:i] + "SE*" + text[j+3:]
		out = append(out, namedSet{"no claim", x12test.Sets(t, []byte(noClaims), "837")[0]})
	} else {
		t.Fatal("demo has no CLM before SE")
	}
	add("generated 1", gen(x12gen.Claims{Claims: 1, Frequency: "7"}))
	corpus := x12test.CorpusSets(t, "837")
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
	return out
}

// TestReusedParserEqualsFreshParse: a Parser reading set after set, the
// whole list forwards and then backwards, returns for each exactly what a
// fresh Parse returns: deeply equal claims and problems (nil when there are
// none, as a fresh parse returns them) and the same JSON; and its Summary
// is that of the fresh claims. Nothing of an earlier set shows in a later
// one.
func TestReusedParserEqualsFreshParse(t *testing.T) {
	sets := reuseSets(t)
	order := slices.Clone(sets)
	slices.Reverse(order)
	order = append(slices.Clone(sets), order...)
	var reused, summaries Parser
	for i, s := range order {
		want, wantProbs := Parse(s.segs)
		if sum, has := summaries.Summary(s.segs); sum != Summarize(want) || has != (want != nil) {
			t.Errorf("set %d (%s): summary %+v (%v), want %+v (%v)", i, s.name, sum, has, Summarize(want), want != nil)
		}
		got, gotProbs := reused.Parse(s.segs)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("set %d (%s): reused claims differ\n got %+v\nwant %+v", i, s.name, got, want)
		}
		if !reflect.DeepEqual(gotProbs, wantProbs) {
			t.Errorf("set %d (%s): reused problems differ\n got %v\nwant %v", i, s.name, gotProbs, wantProbs)
		}
		wantJSON, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		gotJSON, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("set %d (%s): reused JSON differs\n got %s\nwant %s", i, s.name, gotJSON, wantJSON)
		}
		for k := range got {
			if a, b := got[k].AppendJSON(nil), want[k].AppendJSON(nil); !bytes.Equal(a, b) {
				t.Errorf("set %d (%s) claim %d: AppendJSON differs", i, s.name, k)
			}
		}
	}
}

// TestReusedParserLeavesFreshResultsAlone: what the package-level Parse
// returned stays as it was while a Parser reads other sets.
func TestReusedParserLeavesFreshResultsAlone(t *testing.T) {
	sets := reuseSets(t)
	var kept [][]byte
	var docs [][]Claim
	for _, s := range sets {
		c, _ := Parse(s.segs)
		docs = append(docs, c)
		b, _ := json.Marshal(c)
		kept = append(kept, b)
	}
	var reused Parser
	for range 2 {
		for _, s := range sets {
			reused.Parse(s.segs)
			reused.Summary(s.segs)
		}
	}
	for i, c := range docs {
		if got, _ := json.Marshal(c); !bytes.Equal(got, kept[i]) {
			t.Fatalf("set %d (%s) changed under a reused parser", i, sets[i].name)
		}
	}
}

// TestReusedParserAllocatesAlmostNothing: once a Parser has read a set of
// some size, reading it again allocates nothing but, now and then, a
// block of dates.
func TestReusedParserAllocatesAlmostNothing(t *testing.T) {
	var buf bytes.Buffer
	if err := (x12gen.Claims{Claims: 10}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	segs := x12test.Sets(t, buf.Bytes(), "837")[0]
	var p Parser
	p.Parse(segs)
	p.Summary(segs)
	reused := testing.AllocsPerRun(200, func() { p.Parse(segs) })
	summary := testing.AllocsPerRun(200, func() { p.Summary(segs) })
	fresh := testing.AllocsPerRun(20, func() { Parse(segs) })
	if reused > 0.2 || summary > 0.2 {
		t.Errorf("a reused parse allocates %.2f times per set, a summary %.2f (a fresh parse %.0f)", reused, summary, fresh)
	}
}
