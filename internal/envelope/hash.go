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
// In the canonical delimiters most segments are already in normal form, so
// they are kept as they come, each followed by '~', in a chunk of bounded
// size; a full chunk is checked a word at a time and its runs of normal
// segments hashed straight from it, in large writes. Only a segment that is
// not in normal form is normalised on its own. In other delimiters every
// segment is normalised into the output buffer, which is hashed when full.
// SHA-256 is fed large writes only: small ones cost more than the hashing.
type setHasher struct {
	h         hash.Hash
	d         Delimiters
	canonical bool
	buf       []byte // canonical: raw segments, each followed by '~', not yet checked
	out       []byte // normalised bytes not yet hashed
}

const (
	hashChunk = 64 << 10
	// directWrite is the size from which a run of checked bytes is hashed
	// where it lies rather than copied into out.
	directWrite = 4 << 10
)

func newSetHasher() *setHasher {
	return &setHasher{h: sha256.New(), buf: make([]byte, 0, hashChunk+4096), out: make([]byte, 0, hashChunk+4096)}
}

// reset starts a new set whose segments use d.
func (s *setHasher) reset(d Delimiters) {
	s.h.Reset()
	s.d = d
	s.canonical = d == Canonical
	s.buf = s.buf[:0]
	s.out = s.out[:0]
}

// add takes one raw segment (no terminator). The common case, a canonical
// segment that fits the chunk and does not end in an element separator, is
// small enough to be inlined.
func (s *setHasher) add(raw []byte) {
	if n := len(raw); s.canonical && n > 0 && raw[n-1] != '*' && len(s.buf)+n < hashChunk {
		s.buf = append(s.buf, raw...)
		s.buf = append(s.buf, '~')
		return
	}
	s.addSlow(raw)
}

func (s *setHasher) addSlow(raw []byte) {
	if !s.canonical {
		s.out = appendNormalized(s.out, raw, s.d)
		s.out = append(s.out, '~')
		if len(s.out) >= hashChunk {
			s.flushOut()
		}
		return
	}
	if n := len(raw); n > 0 && raw[n-1] == '*' {
		// A trailing empty element: the one case the word check of
		// checkChunk does not see (an element separator is too common
		// to look at), so the segment is normalised here, after the
		// segments before it.
		s.checkChunk()
		s.out = appendNormalized(s.out, raw, s.d)
		s.out = append(s.out, '~')
		if len(s.out) >= hashChunk {
			s.flushOut()
		}
		return
	}
	if len(s.buf)+len(raw) >= hashChunk {
		s.checkChunk()
	}
	s.buf = append(s.buf, raw...)
	s.buf = append(s.buf, '~')
	if len(s.buf) >= hashChunk {
		s.checkChunk()
	}
}

func (s *setHasher) sum(dst *[32]byte) {
	s.checkChunk()
	s.flushOut()
	s.h.Sum(dst[:0])
}

// emit hashes p, normalised bytes, after those already in out.
func (s *setHasher) emit(p []byte) {
	if len(p) >= directWrite {
		s.flushOut()
		s.h.Write(p)
		return
	}
	s.out = append(s.out, p...)
	if len(s.out) >= hashChunk {
		s.flushOut()
	}
}

func (s *setHasher) flushOut() {
	if len(s.out) > 0 {
		s.h.Write(s.out)
		s.out = s.out[:0]
	}
}

// Trigger bytes of the canonical check: a segment in the canonical
// delimiters that holds none of them (and does not end in '*') is in
// normal form. trigger[c] says which bytes after c make the segment not
// normal (bits of nextClass), or trigBad when c itself does; 0 when c is
// no trigger.
const (
	nextTerm uint8 = 1 << iota
	nextElem
	nextRep
	nextComp
	trigBad = 0x80
)

var trigger = func() (t [256]uint8) {
	t[' '] = nextTerm | nextElem | nextRep | nextComp
	t[':'] = nextTerm | nextElem | nextRep
	t['^'] = nextTerm | nextElem
	t[escape] = trigBad
	t['\r'] = trigBad
	t['\n'] = trigBad
	return t
}()

var nextClass = func() (t [256]uint8) {
	t['~'] = nextTerm
	t['*'] = nextElem
	t['^'] = nextRep
	t[':'] = nextComp
	return t
}()

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
	return t
}

// checkChunk hashes buf, raw canonical segments each followed by '~', in
// normal form: runs of segments already normal (the rule of isNormalized)
// straight from buf, any other segment normalised on its own. It must
// agree with appendNormalized on every segment; TestSetHasherMatchesReference
// and FuzzSetHasher hold it to that.
func (s *setHasher) checkChunk() {
	chunk := s.buf
	run, i := 0, 0
	for i < len(chunk) {
		for i+16 <= len(chunk) &&
			(triggerBits(binary.LittleEndian.Uint64(chunk[i:]))|triggerBits(binary.LittleEndian.Uint64(chunk[i+8:])))&highs == 0 {
			i += 16
		}
		end := min(i+16, len(chunk))
		for ; i < end; i++ {
			m := trigger[chunk[i]]
			// A trigger is never the last byte: the chunk ends with '~'.
			if m == 0 || m != trigBad && m&nextClass[chunk[i+1]] == 0 {
				continue
			}
			start := run + bytes.LastIndexByte(chunk[run:i], '~') + 1
			stop := i + bytes.IndexByte(chunk[i:], '~')
			s.emit(chunk[run:start])
			s.out = appendNormalized(s.out, chunk[start:stop], s.d)
			s.out = append(s.out, '~')
			run, i = stop+1, stop+1
			break
		}
	}
	s.emit(chunk[run:])
	s.buf = s.buf[:0]
}
