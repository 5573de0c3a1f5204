package envelope

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func addSeeds(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.*")
	more, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*", "*"))
	paths = append(paths, more...)
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
}

type traced struct {
	d     Delimiters
	id    []byte
	nid   []byte // the identifier in normalised form, to compare
	elems [][][][]byte
}

func traceParse(t *testing.T, data []byte) (*File, []traced) {
	var segs []traced
	file, err := Parse(bytes.NewReader(data), Options{MaxSegment: 8 << 10, Trace: func(s Segment) {
		id, elems := Split(s.Clone())
		segs = append(segs, traced{d: s.Delimiters(), id: id, nid: appendNormalized(nil, id, s.Delimiters()), elems: elems})
	}})
	if err != nil {
		t.Fatalf("Parse over a bytes.Reader failed: %v", err)
	}
	return file, segs
}

// rewrite serialises traced segments with other delimiters, mapping each
// interchange's delimiters to to, and a line break after each segment
// unless the terminator is one.
func rewrite(segs []traced, to Delimiters) []byte {
	var buf bytes.Buffer
	eol := "\n"
	if to.Segment == '\n' || to.Segment == '\r' {
		eol = ""
	}
	w := NewWriter(&buf, to, eol)
	for _, s := range segs {
		// A malformed identifier may hold separators: they are separators
		// under the new delimiters too.
		id := bytes.Clone(s.id)
		for i, c := range id {
			switch {
			case c == s.d.Component:
				id[i] = to.Component
			case s.d.Repetition != 0 && c == s.d.Repetition:
				id[i] = to.Repetition
			}
		}
		w.Fields(id, s.elems)
	}
	w.Flush()
	return buf.Bytes()
}

// FuzzReader asserts that no input panics the reader, that the fast lane
// for set segments agrees with the general path, and that whatever it
// accepts re-serialises to the same segments: written again with other
// delimiters and line breaks, it reads back as the same segments, the same
// keys, the same content hashes and the same errors.
func FuzzReader(f *testing.F) {
	addSeeds(f)
	candidates := []Delimiters{
		Canonical,
		{Element: '|', Repetition: '!', Component: '>', Segment: '\n'},
		{Element: 0x1D, Repetition: 0x1E, Component: 0x1F, Segment: 0x1C},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, segs := traceParse(t, data)
		// Without Trace, set segments take the fast lane: it must agree
		// with the general path on everything.
		fast, err := Parse(bytes.NewReader(data), Options{MaxSegment: 8 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(fast.Keys(), file.Keys()) || !slices.Equal(setHashes(fast), setHashes(file)) ||
			!slices.Equal(errorCodes(fast), errorCodes(file)) || !slices.Equal(segCounts(fast), segCounts(file)) {
			t.Fatalf("fast lane disagrees:\nkeys %q / %q\nerrors %v / %v\nsegments %v / %v",
				fast.Keys(), file.Keys(), errorCodes(fast), errorCodes(file), segCounts(fast), segCounts(file))
		}
		// Warnings are the same whichever lane read the segments and
		// whatever the options.
		for _, opts := range []Options{{MaxSegment: 8 << 10}, {MaxSegment: 8 << 10, KeepSegments: true}, {MaxSegment: 8 << 10, NoContentHash: true}} {
			other, err := Parse(bytes.NewReader(data), opts)
			if err != nil {
				t.Fatal(err)
			}
			if w, o := warnings(file), warnings(other); !slices.Equal(w, o) {
				t.Fatalf("warnings differ with %+v:\n%q\n%q", opts, o, w)
			}
		}
		if !file.X12 || len(file.Errors) > 0 {
			return
		}
		var codes []string
		for _, e := range file.AllErrors() {
			if e.Cause == ErrSegmentTooLong || e.Cause == ErrSetSegmentTooLong {
				return
			}
			codes = append(codes, e.Cause.Code)
		}
		var to Delimiters
		for _, c := range candidates {
			if bytes.IndexByte(data, c.Element) < 0 && bytes.IndexByte(data, c.Repetition) < 0 &&
				bytes.IndexByte(data, c.Component) < 0 && bytes.IndexByte(data, c.Segment) < 0 {
				to = c
				break
			}
		}
		if to.Element == 0 {
			return
		}
		out := rewrite(segs, to)
		file2, segs2 := traceParse(t, out)
		if !file2.X12 || len(file2.Errors) > 0 {
			t.Fatalf("re-serialised input not accepted: %v\n%q", file2.AllErrors(), out)
		}
		if len(segs2) != len(segs) {
			t.Fatalf("%d segments, re-read %d\n%q\n%q", len(segs), len(segs2), data, out)
		}
		for i := range segs {
			if !bytes.Equal(segs[i].nid, segs2[i].nid) || !equalElems(segs[i].elems, segs2[i].elems) {
				t.Fatalf("segment %d differs: %q %q vs %q %q", i, segs[i].id, segs[i].elems, segs2[i].id, segs2[i].elems)
			}
		}
		if !slices.Equal(file.Keys(), file2.Keys()) {
			t.Fatalf("keys %q, re-read %q", file.Keys(), file2.Keys())
		}
		if !slices.Equal(setHashes(file), setHashes(file2)) {
			t.Fatalf("content hashes differ after re-serialising with %v: %q -> %q", to, data, out)
		}
		var codes2 []string
		for _, e := range file2.AllErrors() {
			codes2 = append(codes2, e.Cause.Code)
		}
		if !slices.Equal(codes, codes2) {
			t.Fatalf("errors %v, re-read %v", codes, codes2)
		}
	})
}

func errorCodes(f *File) []string {
	var out []string
	for _, e := range f.AllErrors() {
		out = append(out, e.Cause.Code+"@"+strconv.Itoa(e.Segment))
	}
	return out
}

// warnings lists every warning of f with its place.
func warnings(f *File) []string {
	var out []string
	add := func(ws []Warning) {
		for _, w := range ws {
			out = append(out, fmt.Sprintf("%s@%d/%d: %s", w.Code, w.Segment, w.Offset, w.Message))
		}
	}
	add(f.Warnings)
	for _, ix := range f.Interchanges {
		add(ix.Warnings)
		for _, g := range ix.Groups {
			add(g.Warnings)
			for _, s := range g.Sets {
				add(s.Warnings)
			}
		}
	}
	return out
}

func segCounts(f *File) []int {
	var out []int
	for _, ix := range f.Interchanges {
		for _, g := range ix.Groups {
			for _, s := range g.Sets {
				out = append(out, s.SegmentCount)
			}
		}
	}
	return out
}

func equalElems(a, b [][][][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if len(a[i][j]) != len(b[i][j]) {
				return false
			}
			for k := range a[i][j] {
				if !bytes.Equal(a[i][j][k], b[i][j][k]) {
					return false
				}
			}
		}
	}
	return true
}

// FuzzNormalize asserts that the fast path (hash the segment as it is)
// is taken exactly when the slow path would not change the segment.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"NM1*IL*1*DOE", "REF*6R*X **", "SVC*HC:1:*2", "HI*A:^B", "A*\\", "X^*", "", " ", "A: *"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		norm := appendNormalized(nil, raw, Canonical)
		if fast, same := isNormalized(raw), bytes.Equal(norm, raw); fast != same {
			t.Fatalf("isNormalized(%q) = %v but normal form is %q", raw, fast, norm)
		}
	})
}

// FuzzSetHasher asserts that the chunked, one-pass set hasher computes
// exactly the content hash's definition: SHA-256 over each segment's
// normalised form followed by '~', in canonical and other delimiters.
func FuzzSetHasher(f *testing.F) {
	f.Add([]byte("ST*835*1~CLP*A*1 **:~N1*PR*ACME  ~REF*6R*X\\Y~SE*4*1"), uint16(3))
	f.Add(bytes.Repeat([]byte("SVC*HC:99213:*100~DTM*472*1~"), 2000), uint16(1))
	exotic := Delimiters{Element: '|', Repetition: '!', Component: '>', Segment: '}'}
	f.Fuzz(func(t *testing.T, data []byte, rep uint16) {
		for _, d := range []Delimiters{Canonical, exotic} {
			var segs [][]byte
			for _, seg := range bytes.Split(bytes.Repeat(data, int(rep%64)+1), []byte{d.Segment}) {
				if len(seg) > 0 {
					segs = append(segs, seg)
				}
			}
			want := sha256.New()
			hs := newSetHasher()
			hs.reset(d)
			for _, seg := range segs {
				want.Write(append(appendNormalized(nil, seg, d), '~'))
				hs.add(seg)
			}
			var got [32]byte
			hs.sum(&got)
			if !bytes.Equal(got[:], want.Sum(nil)) {
				t.Fatalf("chunked hash differs from the definition for %v", d)
			}
		}
	})
}
