package x12

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/ediwatch/ediwatch/internal/envelope"
)

// Reading a transaction set without an allocation per element: the set's
// segments are copied once into one string (Text), every element read is
// a substring of it (Fields), dates are carved from a shared buffer
// (Strings), and a claim's lists share a few backing arrays per set
// (AppendShared). What a document keeps keeps the set's text alive, which
// its strings would have cost anyway.

// Text is the segments of one transaction set, copied back to back into a
// single string. Seg returns them in order.
type Text struct {
	s   string
	off int
	d   envelope.Delimiters
}

// NewText copies segs (ST to SE, as a Reader keeps them) into one string:
// one allocation for the whole set.
func NewText(segs []envelope.Segment) Text {
	n := 0
	for i := range segs {
		n += len(segs[i].Raw())
	}
	var b strings.Builder
	b.Grow(n)
	for i := range segs {
		b.Write(segs[i].Raw())
	}
	t := Text{s: b.String()}
	if len(segs) > 0 {
		t.d = segs[0].Delimiters()
	}
	return t
}

// Next returns the next segment's text; the segment of segs[i] on the
// i-th call (0-based), len(raw) bytes long.
func (t *Text) Next(n int) string {
	s := t.s[t.off : t.off+n]
	t.off += n
	return s
}

// Delimiters returns the set's delimiters.
func (t *Text) Delimiters() envelope.Delimiters { return t.d }

// MaxFields is the number of elements (the identifier included) Fields
// keeps of a segment: more than any 835 or 837 segment has.
const MaxFields = 32

// Fields is one segment split on its element separator, each element a
// substring of the segment: Split allocates nothing. A Fields is reused
// segment after segment.
type Fields struct {
	n  int
	el [MaxFields]string
	d  envelope.Delimiters
}

// Split splits seg, which uses d. Elements past MaxFields-1 read as
// absent.
func (f *Fields) Split(seg string, d envelope.Delimiters) {
	f.d = d
	// A byte loop: elements are short, shorter than IndexByte's set-up.
	n, start, es := 0, 0, d.Element
	for i := 0; i < len(seg); i++ {
		if seg[i] == es {
			f.el[n] = seg[start:i]
			n++
			start = i + 1
			if n == MaxFields-1 {
				rest := seg[start:]
				if k := strings.IndexByte(rest, es); k >= 0 {
					rest = rest[:k]
				}
				f.el[n] = rest
				f.n = n + 1
				return
			}
		}
	}
	f.el[n] = seg[start:]
	f.n = n + 1
}

// ID returns the segment identifier.
func (f *Fields) ID() string { return f.el[0] }

// Elem returns data element i (1-based) as is, "" when absent.
func (f *Fields) Elem(i int) string {
	if i < f.n {
		return f.el[i]
	}
	return ""
}

// Str returns data element i with its space padding trimmed, as
// envelope.Segment.Str does.
func (f *Fields) Str(i int) string { return TrimSpaces(f.Elem(i)) }

// Component returns component k (1-based) of the value v split on the
// component separator, trimmed of spaces, and whether v has that many
// components (as envelope.Segment.Components would split it).
func (f *Fields) Component(v string, k int) (string, bool) {
	for ; k > 1; k-- {
		i := strings.IndexByte(v, f.d.Component)
		if i < 0 {
			return "", false
		}
		v = v[i+1:]
	}
	if i := strings.IndexByte(v, f.d.Component); i >= 0 {
		v = v[:i]
	}
	return TrimSpaces(v), true
}

// Repetitions calls fn with each repetition of the value v, as
// envelope.Segment.Repeats splits it.
func (f *Fields) Repetitions(v string, fn func(string)) {
	if f.d.Repetition == 0 {
		fn(v)
		return
	}
	for {
		i := strings.IndexByte(v, f.d.Repetition)
		if i < 0 {
			fn(v)
			return
		}
		fn(v[:i])
		v = v[i+1:]
	}
}

// TrimSpaces trims leading and trailing spaces (bytes.Trim(b, " ")).
func TrimSpaces(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// Strings hands out strings built during a set's parse (dates) from
// shared blocks: one allocation per block instead of one per string. A
// block is never written again once a string refers to it, and a full
// block is replaced, never grown, so the strings stay immutable. The zero
// value is ready.
type Strings struct {
	buf []byte
	// Block is the size of the next block (at least 64 bytes).
	Block int
}

// Date is Date, the result carved from the shared blocks.
func (a *Strings) Date(s string) (string, bool) {
	if !isDate(s) {
		return "", false
	}
	if cap(a.buf)-len(a.buf) < 10 {
		a.buf = make([]byte, 0, max(a.Block, 64))
	}
	start := len(a.buf)
	a.buf = append(a.buf, s[:4]...)
	a.buf = append(a.buf, '-', s[4], s[5], '-', s[6], s[7])
	return unsafe.String(&a.buf[start], 10), true
}

// AppendShared appends v to owner, whose elements must be the last
// len(owner) elements of *arena, by appending to the arena: the lists of a
// set's claims and lines then share one backing array per kind. The result
// has no spare capacity, so appending to it elsewhere copies. When owner
// is not the arena's tail it is appended to on its own.
func AppendShared[T any](arena *[]T, owner []T, v T) []T {
	a, n := *arena, len(owner)
	if n > 0 && (n > len(a) || &a[len(a)-1] != &owner[n-1]) {
		return slices.Clip(append(owner, v))
	}
	a = append(a, v)
	*arena = a
	return a[len(a)-n-1 : len(a) : len(a)]
}

// SegmentID returns the identifier of the raw segment seg packed in a
// uint32, "CLP" as
// 'C'<<16 | 'L'<<8 | 'P', or 0 when it is not two or three bytes followed by
// the element separator es or the end: a cheap first look at a set.
func SegmentID(seg []byte, es byte) uint32 {
	switch {
	case len(seg) >= 3 && (len(seg) == 3 || seg[3] == es):
		return uint32(seg[0])<<16 | uint32(seg[1])<<8 | uint32(seg[2])
	case len(seg) >= 2 && (len(seg) == 2 || seg[2] == es):
		return uint32(seg[0])<<8 | uint32(seg[1])
	}
	return 0
}

// Arena returns a[:0] when it holds n elements, else a new array for n:
// a parser's list kept from set to set.
func Arena[T any](a []T, n int) []T {
	if cap(a) < n {
		return make([]T, 0, n)
	}
	return a[:0]
}

// CopySegments copies the raw bytes of segs back to back into buf (grown
// only when too small) and returns the buffer and its text as a string
// that aliases it: one allocation for a whole set, none when buf is reused.
// The string is valid until buf is written again.
func CopySegments(buf []byte, segs []envelope.Segment) ([]byte, string) {
	n := 0
	for i := range segs {
		n += len(segs[i].Raw())
	}
	b := Arena(buf, n)
	for i := range segs {
		b = append(b, segs[i].Raw()...)
	}
	return b, BytesString(b)
}

// BytesString returns b as a string without copying it: b must not change
// while the string is in use.
func BytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
