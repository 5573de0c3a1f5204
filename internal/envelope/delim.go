package envelope

import (
	"bytes"
	"fmt"
)

// Delimiters are the separators an interchange declares in its ISA header.
type Delimiters struct {
	Element    byte // the byte after "ISA"
	Repetition byte // ISA11 when it is a separator (5010); 0 when none
	Component  byte // ISA16
	Segment    byte // the byte after ISA16
}

// Canonical is the delimiter set ediwatch writes and normalises to.
var Canonical = Delimiters{Element: '*', Repetition: '^', Component: ':', Segment: '~'}

func (d Delimiters) String() string {
	rep := "none"
	if d.Repetition != 0 {
		rep = fmt.Sprintf("%q", d.Repetition)
	}
	return fmt.Sprintf("element %q, repetition %s, component %q, segment %q", d.Element, rep, d.Component, d.Segment)
}

// isaElems is the number of data elements in an ISA segment.
const isaElems = 16

// isaMaxLen bounds how far an ISA header may stretch when its fixed-width
// padding is not canonical. The canonical header is 106 bytes.
const isaMaxLen = 256

// isaHeader is what the ISA segment declares.
type isaHeader struct {
	d         Delimiters
	length    int // bytes up to and including the segment terminator
	canonical bool
	wrapped   bool                 // line breaks inside the header were removed
	elems     [isaElems + 1][]byte // elems[1..16]; slices into the input
}

// canonicalSeps are the offsets of the element separators in a canonical
// 106-byte ISA.
var canonicalSeps = [isaElems]int{3, 6, 17, 20, 31, 34, 50, 53, 69, 76, 81, 83, 89, 99, 101, 103}

// parseISA reads an ISA header at the start of b. It counts element
// separators rather than trusting fixed offsets, so a header whose padding
// was stripped or stretched still yields its delimiters. The error is a
// Cause: the header is unusable.
func parseISA(b []byte) (isaHeader, *Cause, string) {
	h, cause, detail := parseISAOnce(b)
	if cause == ErrISAHeader && bytes.ContainsAny(b[:min(len(b), isaMaxLen)], "\r\n") {
		// A file wrapped at a fixed width wraps its ISA too: read the header
		// without the line breaks, which cannot be its terminator then.
		unwrapped := make([]byte, 0, isaMaxLen)
		for _, c := range b[:min(len(b), isaMaxLen+8)] {
			if c != '\n' && c != '\r' {
				unwrapped = append(unwrapped, c)
			}
		}
		if h2, c2, d2 := parseISAOnce(unwrapped); c2 == nil {
			h2.canonical = false
			h2.wrapped = true
			return h2, nil, ""
		} else if c2 != ErrISAHeader {
			return h2, c2, d2
		}
	}
	return h, cause, detail
}

func parseISAOnce(b []byte) (isaHeader, *Cause, string) {
	var h isaHeader
	if len(b) < 4 || b[0] != 'I' || b[1] != 'S' || b[2] != 'A' {
		return h, ErrISAHeader, "segment does not start with ISA"
	}
	es := b[3]
	if isAlnum(es) || es == ' ' || es == '\r' || es == '\n' {
		return h, ErrElementSeparator, fmt.Sprintf("byte %q after ISA cannot be a separator", es)
	}
	limit := min(len(b), isaMaxLen)
	pos := 3
	for i := 1; i <= isaElems; i++ {
		start := pos + 1
		if i == isaElems {
			// ISA16 is one byte, the component separator, and the segment
			// terminator follows it.
			if start+1 >= limit {
				return h, ErrISAHeader, "header ends before ISA16 and the segment terminator"
			}
			h.elems[i] = b[start : start+1]
			h.d.Component = b[start]
			h.d.Segment = b[start+1]
			h.length = start + 2
			break
		}
		next := bytes.IndexByte(b[start:limit], es)
		if next < 0 {
			return h, ErrISAHeader, fmt.Sprintf("header has %d of %d elements", i-1, isaElems)
		}
		h.elems[i] = b[start : start+next]
		if bytes.IndexByte(h.elems[i], '\n') >= 0 || bytes.IndexByte(h.elems[i], '\r') >= 0 {
			return h, ErrISAHeader, fmt.Sprintf("line break inside ISA%02d", i)
		}
		pos = start + next
	}
	h.canonical = h.length == 106
	if h.canonical {
		for _, p := range canonicalSeps {
			if b[p] != es {
				h.canonical = false
				break
			}
		}
	}
	d := &h.d
	d.Element = es
	switch {
	case d.Component == es || isAlnum(d.Component) || isSpace(d.Component):
		return h, ErrComponentSeparator, fmt.Sprintf("ISA16 is %q", d.Component)
	case d.Segment == es || d.Segment == d.Component || isAlnum(d.Segment) || d.Segment == ' ':
		return h, ErrSegmentTerminator, fmt.Sprintf("segment terminator is %q", d.Segment)
	}
	// A terminator inside the header means these bytes are not one ISA
	// segment but pieces of several.
	if bytes.IndexByte(b[:h.length-1], d.Segment) >= 0 {
		return h, ErrSegmentTerminator, fmt.Sprintf("segment terminator %q occurs inside the ISA header", d.Segment)
	}
	// ISA11 is the repetition separator from version 00402 on; before that
	// it is the standards identifier ("U"). A value equal to another
	// delimiter is ambiguous: the other delimiter wins.
	if r := h.elems[11]; len(r) == 1 && !isAlnum(r[0]) && !isSpace(r[0]) &&
		r[0] != es && r[0] != d.Component && r[0] != d.Segment {
		d.Repetition = r[0]
	}
	return h, nil, ""
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}

func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
