// The set hasher as it was before it was rewritten for speed, kept as the
// reference the new one must agree with, byte for byte.

package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// refSetHasher computes a set's content hash: SHA-256 over its segments in
// normalised form, each followed by '~'. The reader hands it raw segments;
// the hasher keeps them, each followed by the interchange's own terminator
// (which cannot occur inside a segment), in a chunk of bounded size, and
// normalises and hashes a chunk in one pass when it is full or the set
// ends. Handing full chunks to another goroutine was measured slower on two
// cores (603 vs 667 MB/s on 700 KB sets), so it all runs on the caller's.
type refSetHasher struct {
	h       hash.Hash
	d       Delimiters
	buf     []byte // raw terminated segments not yet hashed
	scratch []byte // one segment in normalised form
}

const refHashChunk = 64 << 10

func newRefSetHasher() *refSetHasher {
	return &refSetHasher{h: sha256.New(), buf: make([]byte, 0, refHashChunk+4096)}
}

// reset starts a new set whose segments use d.
func (s *refSetHasher) reset(d Delimiters) {
	s.h.Reset()
	s.d = d
	s.buf = s.buf[:0]
}

// add appends one raw segment (no terminator).
func (s *refSetHasher) add(raw []byte) {
	s.buf = append(s.buf, raw...)
	s.buf = append(s.buf, s.d.Segment)
	if len(s.buf) >= refHashChunk {
		s.process(s.buf)
		s.buf = s.buf[:0]
	}
}

func (s *refSetHasher) sum(dst *[32]byte) {
	s.process(s.buf)
	s.buf = s.buf[:0]
	s.h.Sum(dst[:0])
}

// process normalises and hashes a chunk of terminated raw segments.
func (s *refSetHasher) process(chunk []byte) {
	if s.d == Canonical {
		s.refProcessCanonical(chunk)
		return
	}
	for i := 0; i < len(chunk); {
		j := bytes.IndexByte(chunk[i:], s.d.Segment)
		s.scratch = appendNormalized(s.scratch[:0], chunk[i:i+j], s.d)
		s.scratch = append(s.scratch, '~')
		s.h.Write(s.scratch)
		i += j + 1
	}
}

// refChunkClass is normClass with the canonical terminator as a class of its
// own, so one pass over a chunk splits segments and checks their form.
var refChunkClass = func() [256]uint8 {
	t := normClass
	t['~'] = refClsTerm
	return t
}()

const refClsTerm = clsEscape + 1

// refProcessCanonical hashes a chunk in the canonical delimiters in one pass:
// runs of segments already in normal form (the rule of isNormalized) are
// hashed straight from the chunk; a segment that is not is normalised on
// its own.
func (s *refSetHasher) refProcessCanonical(chunk []byte) {
	run, segStart := 0, 0
	prev := clsData
	for i := 0; i < len(chunk); i++ {
		cls := refChunkClass[chunk[i]]
		if cls == clsData {
			prev = clsData
			continue
		}
		var bad bool
		switch cls {
		case refClsTerm:
			if prev == clsData {
				segStart, prev = i+1, clsData
				continue
			}
			bad = true
		case clsEscape:
			bad = true
		case clsElem:
			bad = prev == clsSpace || prev == clsComp || prev == clsRep
		case clsRep:
			bad = prev == clsSpace || prev == clsComp
		case clsComp:
			bad = prev == clsSpace
		}
		if !bad {
			prev = cls
			continue
		}
		end := segStart + bytes.IndexByte(chunk[segStart:], '~')
		if run < segStart {
			s.h.Write(chunk[run:segStart])
		}
		s.scratch = appendNormalized(s.scratch[:0], chunk[segStart:end], s.d)
		s.scratch = append(s.scratch, '~')
		s.h.Write(s.scratch)
		i, segStart, run, prev = end, end+1, end+1, clsData
	}
	if run < len(chunk) {
		s.h.Write(chunk[run:])
	}
}

// refHashes reads data with KeepSegments and hashes each set's kept
// segments (those the reader hashed: read as they were, line breaks
// removed) with the reference hasher.
func refHashes(t *testing.T, data []byte) []string {
	t.Helper()
	rd := NewReader(bytes.NewReader(data), Options{KeepSegments: true, MaxSegment: 256 << 10})
	var out []string
	hs := newRefSetHasher()
	for {
		k, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if k != KindSet {
			continue
		}
		segs := rd.Set().Segments()
		if len(segs) == 0 {
			t.Fatal("a set without segments")
		}
		hs.reset(segs[0].Delimiters())
		for _, seg := range segs {
			hs.add(seg.Raw())
		}
		var sum [32]byte
		hs.sum(&sum)
		out = append(out, hex.EncodeToString(sum[:]))
	}
}

// checkAgainstReference parses data fresh, with kept segments and without
// the content hash, and asserts the hashes equal the reference hasher's,
// and that the keys, errors and counts do not depend on the options.
func checkAgainstReference(t *testing.T, name string, data []byte) {
	t.Helper()
	want := refHashes(t, data)
	var base *File
	for _, opts := range []Options{{}, {KeepSegments: true}, {NoContentHash: true}, {NoContentHash: true, KeepSegments: true}} {
		opts.MaxSegment = 256 << 10
		f, err := Parse(bytes.NewReader(data), opts)
		if err != nil {
			t.Fatal(err)
		}
		got := setHashes(f)
		if opts.NoContentHash {
			zero := hex.EncodeToString(make([]byte, 32))
			for i, h := range got {
				if h != zero {
					t.Fatalf("%s: NoContentHash left set %d hashed", name, i)
				}
			}
		} else if !slices.Equal(got, want) {
			t.Fatalf("%s %+v: content hashes differ from the reference:\n%q\n%q", name, opts, got, want)
		}
		if base == nil {
			base = f
			continue
		}
		if !slices.Equal(f.Keys(), base.Keys()) || !slices.Equal(errorCodes(f), errorCodes(base)) ||
			!slices.Equal(segCounts(f), segCounts(base)) {
			t.Fatalf("%s %+v: keys, errors or counts depend on the options", name, opts)
		}
	}
}

// wrapLines breaks data every n bytes with eol, as fixed-width senders do.
func wrapLines(data []byte, n int, eol string) []byte {
	var b bytes.Buffer
	for len(data) > n {
		b.Write(data[:n])
		b.WriteString(eol)
		data = data[n:]
	}
	b.Write(data)
	return b.Bytes()
}

// TestContentHashMatchesReference holds the reader's content hashes to the
// hasher it had before it was rewritten for speed, on the test files, the
// public corpus, generated files in other delimiters, line endings and
// wrapping, and random mutations of them.
func TestContentHashMatchesReference(t *testing.T) {
	var inputs []string
	paths, _ := filepath.Glob("testdata/*.*")
	inputs = append(inputs, paths...)
	more, _ := filepath.Glob(filepath.Join(testenv.Corpus(t), "*", "*"))
	inputs = append(inputs, more...)
	var datas [][]byte
	var names []string
	for _, p := range inputs {
		data, err := os.ReadFile(p)
		if err != nil || len(data) > 8<<20 {
			continue
		}
		datas, names = append(datas, data), append(names, p)
	}
	gens := []x12gen.Remit{
		{ClaimsPerSet: 3, LinesPerClaim: 2},
		{SetsPerGroup: 3, ClaimsPerSet: 400, LinesPerClaim: 3, EOL: "\n"},
		{ClaimsPerSet: 50, EOL: "\r\n"},
		{ClaimsPerSet: 50, Element: '|', Component: '>', Repetition: '!', Segment: '\n'},
		{ClaimsPerSet: 50, Element: 0x1D, Component: 0x1F, Repetition: 0x1E, Segment: 0x1C, EOL: "\r\n"},
		{ClaimsPerSet: 2000, Element: '*', Component: '>', Repetition: '^', Segment: '~'},
		{ClaimsPerSet: 30, Payer: "PAY ER  ", Trace: "A:B^C\\ "},
		{ClaimsPerSet: 30, Element: '*', Component: ':', Repetition: 'U', Segment: '~', Payer: "PAY^ER", Trace: "A^B"},
	}
	for i, g := range gens {
		var buf bytes.Buffer
		if _, err := g.Write(&buf); err != nil {
			t.Fatal(err)
		}
		datas, names = append(datas, buf.Bytes()), append(names, fmt.Sprintf("generated %d", i))
		datas, names = append(datas, wrapLines(buf.Bytes(), 80, "\r\n")), append(names, fmt.Sprintf("generated %d wrapped", i))
	}
	rng := rand.New(rand.NewPCG(14, 14))
	// Bytes that change normal form, and the delimiters.
	alphabet := []byte(" :^*~\\\r\n|>!AZ09")
	n := len(datas)
	for i := 0; i < n; i++ {
		if len(datas[i]) > 1<<20 {
			continue
		}
		for range 8 {
			m := bytes.Clone(datas[i])
			for range 1 + rng.IntN(40) {
				if len(m) > 110 {
					m[110+rng.IntN(len(m)-110)] = alphabet[rng.IntN(len(alphabet))]
				}
			}
			datas, names = append(datas, m), append(names, names[i]+" mutated")
		}
	}
	for i, data := range datas {
		checkAgainstReference(t, names[i], data)
	}
}

// TestSetHasherMatchesReference feeds random segments, rich in the bytes
// that change a segment's normal form, to the hasher and to the reference
// one, in the canonical and other delimiters, across chunk boundaries.
func TestSetHasherMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	delims := []Delimiters{Canonical, {Element: '*', Component: ':', Segment: '~'},
		{Element: '|', Repetition: '!', Component: '>', Segment: '\n'}, {Element: '*', Repetition: '^', Component: '>', Segment: '~'}}
	for round := range 400 {
		d := delims[round%len(delims)]
		alphabet := []byte{'A', 'B', '0', ' ', ' ', '\\', '\r', '\n', d.Element, d.Element, d.Component, '*', ':', '^', '~', '|', '>'}
		if d.Repetition != 0 {
			alphabet = append(alphabet, d.Repetition)
		}
		clean := []byte("ABCDEFGH0123")
		hs, ref := newSetHasher(), newRefSetHasher()
		hs.reset(d)
		ref.reset(d)
		want := sha256.New()
		for range rng.IntN(3000) {
			var seg []byte
			size := rng.IntN(40)
			if rng.IntN(500) == 0 {
				size = rng.IntN(200 << 10)
			}
			dirty := rng.IntN(4) == 0
			for range size {
				if dirty || rng.IntN(10) == 0 {
					seg = append(seg, alphabet[rng.IntN(len(alphabet))])
				} else {
					seg = append(seg, clean[rng.IntN(len(clean))])
				}
			}
			seg = bytes.ReplaceAll(seg, []byte{d.Segment}, []byte("X"))
			hs.add(seg)
			ref.add(seg)
			want.Write(append(appendNormalized(nil, seg, d), '~'))
		}
		var got, old [32]byte
		hs.sum(&got)
		ref.sum(&old)
		if got != old || !bytes.Equal(got[:], want.Sum(nil)) {
			t.Fatalf("round %d (%v): hash differs from the reference", round, d)
		}
	}
}

// TestKeyCleanAgreesWithKeyVal holds the shortcut of startSet (a clean ST01
// or ST02 is its own key part) and of endSet (SE01 compared as bytes) to
// keyVal and numEqual, on random values rich in the bytes they treat apart.
func TestKeyCleanAgreesWithKeyVal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("AZ09 :%*^~\\|>!+-\x00\x7f\xc3")
	for _, d := range []Delimiters{Canonical, {Element: '|', Repetition: '!', Component: '>', Segment: '\n'}, {Element: '*', Component: ':', Segment: '~'}} {
		for range 20000 {
			v := make([]byte, rng.IntN(12))
			for i := range v {
				v[i] = alphabet[rng.IntN(len(alphabet))]
			}
			v = bytes.Trim(v, " ")
			if keyClean(v, d) && keyVal(string(v), d) != string(v) {
				t.Fatalf("keyClean(%q) but keyVal gives %q", v, keyVal(string(v), d))
			}
			n := rng.IntN(2000)
			if numEqualBytes(v, n) != numEqual(string(v), n) {
				t.Fatalf("numEqualBytes(%q, %d) disagrees with numEqual", v, n)
			}
		}
	}
	for _, v := range []string{"0", "12", "0012", "000000001", "+12", "-0", "", "1 2", "99999999999999999999"} {
		for _, n := range []int{0, 1, 12} {
			if numEqualBytes([]byte(v), n) != numEqual(v, n) {
				t.Fatalf("numEqualBytes(%q, %d) disagrees with numEqual", v, n)
			}
		}
	}
}
