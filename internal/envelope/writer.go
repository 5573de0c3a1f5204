package envelope

import (
	"bufio"
	"bytes"
	"io"
)

// Writer writes segments with a given set of delimiters. It is what
// ediwatch uses to emit 999 and TA1 interchanges. Errors are sticky: after a
// failed write, every call returns the first error.
type Writer struct {
	w   *bufio.Writer
	d   Delimiters
	eol string
	err error
}

// NewWriter returns a Writer that ends each segment with d.Segment followed
// by eol (e.g. "\n" for readability, or "").
func NewWriter(w io.Writer, d Delimiters, eol string) *Writer {
	return &Writer{w: bufio.NewWriter(w), d: d, eol: eol}
}

// Delimiters returns the delimiters the Writer uses.
func (w *Writer) Delimiters() Delimiters { return w.d }

// Segment writes one segment: the identifier and its elements, joined by the
// element separator. Trailing empty elements are dropped, as X12 requires.
// Composite and repeated values must already be joined with the Writer's
// component and repetition separators.
func (w *Writer) Segment(id string, elems ...string) error {
	for len(elems) > 0 && elems[len(elems)-1] == "" {
		elems = elems[:len(elems)-1]
	}
	return w.raw(id, elems)
}

// raw writes a segment keeping trailing empty elements (the ISA keeps all
// sixteen).
func (w *Writer) raw(id string, elems []string) error {
	if w.err != nil {
		return w.err
	}
	w.w.WriteString(id)
	for _, e := range elems {
		w.w.WriteByte(w.d.Element)
		w.w.WriteString(e)
	}
	w.w.WriteByte(w.d.Segment)
	_, w.err = w.w.WriteString(w.eol)
	return w.err
}

// Fields writes a segment given as elements, each a list of repetitions,
// each a list of components.
func (w *Writer) Fields(id []byte, elems [][][][]byte) error {
	if w.err != nil {
		return w.err
	}
	w.w.Write(id)
	for _, reps := range elems {
		w.w.WriteByte(w.d.Element)
		for i, comps := range reps {
			if i > 0 {
				w.w.WriteByte(w.d.Repetition)
			}
			for j, c := range comps {
				if j > 0 {
					w.w.WriteByte(w.d.Component)
				}
				w.w.Write(c)
			}
		}
	}
	w.w.WriteByte(w.d.Segment)
	_, w.err = w.w.WriteString(w.eol)
	return w.err
}

// Flush writes buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.err = w.w.Flush()
	return w.err
}

// Split returns a segment's elements (after the identifier), each split
// into repetitions and components: the form Writer.Fields takes.
func Split(s Segment) (id []byte, elems [][][][]byte) {
	all := s.Elements()
	for _, e := range all[1:] {
		var reps [][]byte
		if s.d.Repetition != 0 {
			reps = splitByte(e, s.d.Repetition)
		} else {
			reps = [][]byte{e}
		}
		el := make([][][]byte, len(reps))
		for i, r := range reps {
			el[i] = splitByte(r, s.d.Component)
		}
		elems = append(elems, el)
	}
	return all[0], elems
}

func splitByte(b []byte, sep byte) [][]byte {
	var out [][]byte
	for {
		i := bytes.IndexByte(b, sep)
		if i < 0 {
			return append(out, b)
		}
		out = append(out, b[:i])
		b = b[i+1:]
	}
}

// ISA writes an interchange header: its sixteen elements as given (fixed
// width is the caller's), keeping empty ones. ISA16 must be the Writer's
// component separator.
func (w *Writer) ISA(elems [16]string) error { return w.raw("ISA", elems[:]) }
