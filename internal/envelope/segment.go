package envelope

import "bytes"

// Segment is one X12 segment: its identifier and elements, joined by the
// interchange's delimiters, without the segment terminator. A Segment
// returned by a Reader refers to memory the Reader reuses: it is valid until
// the Reader's next call to Next. Copy what must outlive that.
type Segment struct {
	raw []byte
	d   Delimiters
	// Offset is the byte offset of the segment in the file.
	Offset int64
	// Index is the 1-based index of the segment in the file.
	Index int
}

// NewSegment wraps raw segment bytes (no terminator) that use d.
func NewSegment(raw []byte, d Delimiters) Segment { return Segment{raw: raw, d: d} }

// Raw returns the segment bytes as read, without the terminator.
func (s Segment) Raw() []byte { return s.raw }

// Delimiters returns the delimiters of the segment's interchange.
func (s Segment) Delimiters() Delimiters { return s.d }

// ID returns the segment identifier, e.g. "CLP".
func (s Segment) ID() string { return string(s.id()) }

func (s Segment) id() []byte {
	if i := bytes.IndexByte(s.raw, s.d.Element); i >= 0 {
		return s.raw[:i]
	}
	return s.raw
}

// Len returns the number of data elements (the highest position present).
func (s Segment) Len() int { return bytes.Count(s.raw, []byte{s.d.Element}) }

// Elem returns data element i (1-based, as in "CLP04"); element 0 is the
// identifier. It returns nil when the segment has fewer elements. The
// element may still hold component and repetition separators.
func (s Segment) Elem(i int) []byte {
	b := s.raw
	for ; i > 0; i-- {
		j := bytes.IndexByte(b, s.d.Element)
		if j < 0 {
			return nil
		}
		b = b[j+1:]
	}
	if j := bytes.IndexByte(b, s.d.Element); j >= 0 {
		b = b[:j]
	}
	return b
}

// Str returns element i as a string with its space padding trimmed.
func (s Segment) Str(i int) string { return string(bytes.Trim(s.Elem(i), " ")) }

// Comp returns component j (1-based) of the first repetition of element i,
// or nil when absent. Comp(i, 1) of a simple element is the element.
func (s Segment) Comp(i, j int) []byte {
	e := s.Elem(i)
	if s.d.Repetition != 0 {
		if k := bytes.IndexByte(e, s.d.Repetition); k >= 0 {
			e = e[:k]
		}
	}
	return nthField(e, s.d.Component, j)
}

// Repeats returns the repetitions of element i.
func (s Segment) Repeats(i int) [][]byte {
	e := s.Elem(i)
	if e == nil {
		return nil
	}
	if s.d.Repetition == 0 {
		return [][]byte{e}
	}
	return bytes.Split(e, []byte{s.d.Repetition})
}

// Components splits one element value (or one repetition) into components.
func (s Segment) Components(v []byte) [][]byte { return bytes.Split(v, []byte{s.d.Component}) }

func nthField(b []byte, sep byte, n int) []byte {
	for ; n > 1; n-- {
		k := bytes.IndexByte(b, sep)
		if k < 0 {
			return nil
		}
		b = b[k+1:]
	}
	if k := bytes.IndexByte(b, sep); k >= 0 {
		b = b[:k]
	}
	return b
}

// Elements returns the identifier and every data element, split on the
// element separator.
func (s Segment) Elements() [][]byte { return bytes.Split(s.raw, []byte{s.d.Element}) }

// Clone returns a copy that does not share memory with the Reader.
func (s Segment) Clone() Segment {
	s.raw = bytes.Clone(s.raw)
	return s
}
