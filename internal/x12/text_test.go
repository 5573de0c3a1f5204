package x12_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12"
	"github.com/ediwatch/ediwatch/internal/x12/x12test"
)

// fieldsAgree checks every accessor of Fields against envelope.Segment's on
// one segment.
func fieldsAgree(t *testing.T, seg envelope.Segment) {
	t.Helper()
	var f x12.Fields
	f.Split(string(seg.Raw()), seg.Delimiters())
	if f.ID() != seg.ID() {
		t.Fatalf("%q: ID %q, want %q", seg.Raw(), f.ID(), seg.ID())
	}
	for i := 1; i < x12.MaxFields+3; i++ {
		want := seg.Elem(i)
		if i >= x12.MaxFields {
			want = nil // documented: read as absent
		}
		if f.Elem(i) != string(want) || f.Str(i) != string(bytes.Trim(want, " ")) {
			t.Fatalf("%q element %d: %q (%q), want %q", seg.Raw(), i, f.Elem(i), f.Str(i), want)
		}
		comps := seg.Components(want)
		for k := 1; k <= 7; k++ {
			got, ok := f.Component(f.Elem(i), k)
			wantOK := k <= len(comps)
			var w string
			if wantOK {
				w = string(bytes.Trim(comps[k-1], " "))
			}
			if got != w || ok != wantOK {
				t.Fatalf("%q element %d component %d: %q %v, want %q %v", seg.Raw(), i, k, got, ok, w, wantOK)
			}
		}
		var reps []string
		f.Repetitions(f.Elem(i), func(r string) { reps = append(reps, r) })
		if want != nil {
			wr := seg.Repeats(i)
			if len(reps) != len(wr) {
				t.Fatalf("%q element %d: %d repetitions, want %d", seg.Raw(), i, len(reps), len(wr))
			}
			for k := range wr {
				if reps[k] != string(wr[k]) {
					t.Fatalf("%q element %d repetition %d: %q, want %q", seg.Raw(), i, k, reps[k], wr[k])
				}
			}
		}
	}
}

// TestFieldsAgreeWithSegment: the allocation-free accessors read every
// segment of the corpus's 835 and 837 sets, and random segments, as
// envelope.Segment's accessors do; Text hands out each segment's bytes.
func TestFieldsAgreeWithSegment(t *testing.T) {
	n := 0
	for _, typ := range []string{"835", "837"} {
		for _, sets := range x12test.CorpusSets(t, typ) {
			for _, segs := range sets {
				text := x12.NewText(segs)
				for _, s := range segs {
					if got := text.Next(len(s.Raw())); got != string(s.Raw()) {
						t.Fatalf("Text: %q, want %q", got, s.Raw())
					}
					fieldsAgree(t, s)
					n++
				}
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d corpus segments", n)
	}
	r := rand.New(rand.NewPCG(14, 32))
	for _, d := range []envelope.Delimiters{envelope.Canonical, {Element: '|', Component: '>', Segment: '\n'}} {
		for range 5000 {
			var b strings.Builder
			b.WriteString("SVC")
			for range r.IntN(40) {
				b.WriteByte(d.Element)
				for range r.IntN(5) {
					b.WriteByte(" A1*:^|>"[r.IntN(8)])
				}
			}
			fieldsAgree(t, envelope.NewSegment([]byte(b.String()), d))
		}
	}
}

// TestStringsDatesStayPut: dates carved from shared blocks keep their
// values as more are carved and blocks fill up.
func TestStringsDatesStayPut(t *testing.T) {
	var a x12.Strings
	var got []string
	for i := range 500 {
		in := []string{"20261130", "19991231", "20000101"}[i%3]
		d, ok := a.Date(in)
		want, _ := x12.Date(in)
		if !ok || d != want {
			t.Fatalf("Date(%q) = %q %v", in, d, ok)
		}
		got = append(got, d)
	}
	for i, d := range got {
		if want, _ := x12.Date([]string{"20261130", "19991231", "20000101"}[i%3]); d != want {
			t.Fatalf("date %d changed to %q", i, d)
		}
	}
	if _, ok := a.Date("20261332"); ok {
		t.Error("month 13 accepted")
	}
}

// TestAppendSharedKeepsOwnersApart: owners appended in turn share the
// arena; an owner appended to again after another is copied out rather
// than overwriting its neighbour; appending to a result elsewhere copies.
func TestAppendSharedKeepsOwnersApart(t *testing.T) {
	arena := make([]int, 0, 3)
	var a, b []int
	a = x12.AppendShared(&arena, a, 1)
	a = x12.AppendShared(&arena, a, 2)
	b = x12.AppendShared(&arena, b, 3)
	_ = append(a, 99)                  // no spare capacity: a copy, b untouched
	a = x12.AppendShared(&arena, a, 4) // a is no longer the tail
	b = x12.AppendShared(&arena, b, 5) // past the arena's capacity
	_ = append(a, 98)
	if !slicesEqual(a, []int{1, 2, 4}) || !slicesEqual(b, []int{3, 5}) {
		t.Fatalf("a %v b %v", a, b)
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
