package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// setHasher computes a set's content hash: SHA-256 over its segments in
// normalised form, each followed by '~'. The reader hands it raw segments.
//
// In the canonical delimiters (with or without a repetition separator: a
// '^' is a trigger byte) most segments are already in normal form: a
// segment free of trigger bytes (hasTrigger, a word at a time) that does
// not end in '*' is copied as it is; any other is checked byte by byte
// (isNormalized) and normalised only when it must be. In other delimiters
// a segment is translated to the canonical ones byte for byte, and the
// translation checked the same way. Either way the normal form is gathered
// in a buffer hashed when full: SHA-256 is fed large writes only, as small
// ones cost more than the hashing.
type setHasher struct {
	h hash.Hash
	d Delimiters
	// canonical: d is Canonical, or Canonical without a repetition
	// separator (noRep), where a '^' is data and never in normal form.
	canonical, noRep bool
	out              []byte // normalised bytes not yet hashed
	// tr maps the bytes of a segment in other delimiters to the canonical
	// ones, and data bytes that normal form escapes to '\\' (so the
	// translation is not normal); trFor is the d it was made for.
	tr    [256]byte
	trFor Delimiters
	// normal: every segment of the set so far was in normal form as read
	// (in other delimiters, once translated to the canonical ones).
	normal bool
}

const hashChunk = 64 << 10

func newSetHasher() *setHasher {
	return &setHasher{h: sha256.New(), out: make([]byte, 0, hashChunk+4096)}
}

// reset starts a new set whose segments use d.
func (s *setHasher) reset(d Delimiters) {
	s.h.Reset()
	s.d = d
	s.noRep = d == Delimiters{Element: '*', Component: ':', Segment: '~'}
	s.canonical = d == Canonical || s.noRep
	if !s.canonical && d != s.trFor {
		s.trFor = d
		for i := range s.tr {
			s.tr[i] = byte(i)
		}
		for _, c := range []byte{'*', ':', '^', '~', escape} {
			s.tr[c] = escape
		}
		s.tr[d.Element], s.tr[d.Component] = '*', ':'
		if d.Repetition != 0 {
			s.tr[d.Repetition] = '^'
		}
	}
	s.out = s.out[:0]
	s.normal = true
}

// add takes one raw segment (no terminator).
func (s *setHasher) add(raw []byte) { s.addChecked(raw, hasTrigger(raw)) }

// addChecked takes one raw segment and hasTrigger(raw), which the reader
// may have needed already.
func (s *setHasher) addChecked(raw []byte, trig bool) {
	switch n := len(raw); {
	case s.canonical && !trig && n > 0 && raw[n-1] != '*',
		s.canonical && (!s.noRep || bytes.IndexByte(raw, '^') < 0) && isNormalized(raw):
		s.out = append(s.out, raw...)
	case s.canonical:
		start := len(s.out)
		s.out = appendNormalized(s.out, raw, s.d)
		s.normal = s.normal && sameSansBreaks(raw, s.out[start:], nil)
	default:
		// Other delimiters: translated byte for byte to the canonical
		// ones, the segment is in normal form when its translation is
		// (a byte normal form would escape or drop is not normal).
		start := len(s.out)
		s.out = append(s.out, raw...)
		t := s.out[start:]
		for i, c := range t {
			t[i] = s.tr[c]
		}
		if (hasTrigger(t) || n > 0 && t[n-1] == '*') && !isNormalized(t) {
			s.out = appendNormalized(s.out[:start], raw, s.d)
			s.normal = s.normal && sameSansBreaks(raw, s.out[start:], &s.tr)
		}
	}
	s.out = append(s.out, '~')
	if len(s.out) >= hashChunk {
		s.h.Write(s.out)
		s.out = s.out[:0]
	}
}

// sameSansBreaks reports whether raw, its bytes mapped by tr (nil: as
// they are) and its CR and LF dropped, is norm: whether normalising raw
// did no more than drop the line breaks, which the reader drops from the
// segments it hands on too.
func sameSansBreaks(raw, norm []byte, tr *[256]byte) bool {
	j := 0
	for _, c := range raw {
		if c == '\r' || c == '\n' {
			continue
		}
		if tr != nil {
			c = tr[c]
		}
		if j >= len(norm) || norm[j] != c {
			return false
		}
		j++
	}
	return j == len(norm)
}

func (s *setHasher) sum(dst *[32]byte) {
	s.h.Write(s.out)
	s.out = s.out[:0]
	s.h.Sum(dst[:0])
}

// hasTrigger reports whether seg may not be in normal form in the
// canonical delimiters: whether it holds a byte below '!' (space, CR, LF,
// other controls), ':', '^', '\' or DEL. Without one (and without a
// trailing '*') a canonical segment is normal. Any line break or control
// character makes it true, so it also tells the reader which segments need
// a closer look for them.
func hasTrigger(seg []byte) bool {
	n := len(seg)
	if n < 8 {
		for _, c := range seg {
			if c < '!' || c == ':' || c == '^' || c == escape || c == 0x7F {
				return true
			}
		}
		return false
	}
	var t uint64
	k := 0
	for ; k+8 <= n; k += 8 {
		t |= triggerBits(binary.LittleEndian.Uint64(seg[k:]))
	}
	if k < n {
		t |= triggerBits(binary.LittleEndian.Uint64(seg[n-8:]))
	}
	return t&highs != 0
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// triggerBits is nonzero under highs when the 8 bytes of v hold a byte
// below '!' (space, CR, LF and other controls), ':', '^' or '\'. Bytes
// other than triggers may set it too; they only cost a closer look.
func triggerBits(v uint64) uint64 {
	t := (v - 0x21*ones) &^ v // a byte below 0x21
	a := v ^ (':' * ones)
	t |= (a - ones) &^ a
	b := (v | 0x02*ones) ^ ('^' * ones) // '^' or '\' (0x5C | 0x02 = '^')
	t |= (b - ones) &^ b
	d := v ^ (0x7F * ones) // DEL, a control character
	t |= (d - ones) &^ d
	return t
}
