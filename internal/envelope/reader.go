// Package envelope reads X12 interchanges from a stream: it finds the
// delimiters, walks interchanges, functional groups and transaction sets,
// validates their control structure, and names every transaction set with
// the inbox key and the content hash that make re-deliveries recognisable.
//
// The Reader holds one segment at a time (or, with Options.KeepSegments, one
// transaction set), never the file: memory is bounded by
// Options.MaxSegment, whatever the size of the input.
package envelope

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Options tune a Reader. The zero value is usable.
type Options struct {
	// MaxSegment is the longest segment accepted, in bytes; a longer one is
	// skipped up to its terminator and reported. Default 1 MiB.
	MaxSegment int
	// KeepSegments makes Set.Segments return the set's segments at KindSet.
	KeepSegments bool
	// Trace, when set, is called with every segment read, envelope
	// segments included, before it is applied. The segment is valid only
	// during the call.
	Trace func(Segment)
	// SearchWindow is how far into the file the Reader looks for an ISA
	// header behind leading text. Default 64 KiB.
	SearchWindow int
	// NoContentHash skips the content hash: Set.ContentHash stays zero.
	// Keys, counts and errors are the same. For a pass that needs only the
	// envelope's verdicts, it saves most of the reading time.
	NoContentHash bool
}

const (
	defaultMaxSegment = 1 << 20
	defaultWindow     = 64 << 10
	// maxErrors bounds the errors kept per interchange, group, set and
	// file, so hostile input cannot grow memory through its errors.
	maxErrors = 100
)

// Kind says what a call to Reader.Next completed.
type Kind uint8

const (
	// KindSet: a transaction set ended (at SE, or cut short); see Reader.Set.
	KindSet Kind = iota + 1
	// KindGroupEnd: a functional group ended; see Reader.Group.
	KindGroupEnd
	// KindInterchangeEnd: an interchange ended; see Reader.Interchange.
	KindInterchangeEnd
)

// Interchange is one ISA..IEA envelope. Its header fields are set when the
// ISA is read, its trailer fields and errors as the interchange goes on.
type Interchange struct {
	Offset  int64
	Segment int
	// Delimiters are those the ISA declared.
	Delimiters Delimiters
	// Canonical is false when the ISA is not the fixed-width 106 bytes.
	Canonical         bool
	SenderQualifier   string // ISA05
	SenderID          string // ISA06
	ReceiverQualifier string // ISA07
	ReceiverID        string // ISA08
	Date              string // ISA09
	Time              string // ISA10
	Standards         string // ISA11 as written
	Version           string // ISA12
	ControlNumber     string // ISA13
	AckRequested      bool   // ISA14 = 1
	Usage             string // ISA15: P, T or I
	// GroupCount is the number of GS segments read.
	GroupCount int
	// TA1 holds the interchange acknowledgments the interchange carries.
	TA1 []TA1
	// Groups is filled by Parse only; a Reader does not retain groups.
	Groups []*Group
	// Errors are the interchange-level errors (reported in a TA1).
	Errors []*ParseError
	// Warnings are the leniencies applied to the interchange envelope and
	// to the segments read in it (see Warning).
	Warnings []Warning
	// Complete is true when the IEA was read.
	Complete bool

	key      string
	crlf     bool // the segment terminator is CR and LF follows it
	nested   int  // errors in this interchange's groups and sets
	gs06Seen ctlSet
}

// TA1 is an interchange acknowledgment segment found in an interchange.
type TA1 struct {
	ControlNumber string // TA101
	Date          string // TA102
	Time          string // TA103
	AckCode       string // TA104: A, E or R
	NoteCode      string // TA105
}

// Key returns the interchange part of the inbox keys:
// x12:{ISA15}:{ISA05}:{ISA06}:{ISA07}:{ISA08}:{ISA13}. An interchange without
// transaction sets (a TA1 alone) is keyed by it.
func (ix *Interchange) Key() string { return ix.key }

// Sender returns "qualifier:id", e.g. "ZZ:ACMEHP".
func (ix *Interchange) Sender() string { return ix.SenderQualifier + ":" + ix.SenderID }

// Receiver returns "qualifier:id".
func (ix *Interchange) Receiver() string { return ix.ReceiverQualifier + ":" + ix.ReceiverID }

// Valid reports whether the interchange and everything in it is free of
// errors.
func (ix *Interchange) Valid() bool { return len(ix.Errors) == 0 && ix.nested == 0 }

// EnvelopeValid reports whether the interchange envelope itself is free of
// errors, whatever its groups hold. An invalid envelope is rejected whole.
func (ix *Interchange) EnvelopeValid() bool { return len(ix.Errors) == 0 }

// Group is one GS..GE functional group.
type Group struct {
	Offset        int64
	Segment       int
	FunctionalID  string // GS01
	SenderCode    string // GS02
	ReceiverCode  string // GS03
	Date          string // GS04
	Time          string // GS05
	ControlNumber string // GS06
	Agency        string // GS07
	Version       string // GS08
	// SetCount is the number of ST segments read.
	SetCount int
	// DeclaredSets is GE01 as read, or -1 when there is no GE or GE01 is
	// not a number.
	DeclaredSets int
	// Sets is filled by Parse only.
	Sets []*Set
	// Errors are the group-level errors (reported in AK9).
	Errors []*ParseError
	// Warnings are the leniencies applied to GS and GE.
	Warnings []Warning
	Complete bool

	key    string
	nested int
	stSeen ctlSet
}

// Key returns the group part of the inbox keys (the interchange part, then
// :{GS02}:{GS03}:{GS06}); the 999 business key is built from it.
func (g *Group) Key() string { return g.key }

// Valid reports whether the group and its sets are free of errors.
func (g *Group) Valid() bool { return len(g.Errors) == 0 && g.nested == 0 }

// Set is one ST..SE transaction set.
type Set struct {
	Offset         int64
	Segment        int
	Type           string // ST01
	ControlNumber  string // ST02
	Implementation string // ST03
	// Key is the inbox key: the group part, then :{ST01}:{ST02}.
	Key string
	// ContentHash is SHA-256 over the set's normalised segments, ST to SE;
	// zero when the Reader's Options.NoContentHash is set.
	ContentHash [32]byte
	// Normal says every segment of the set was in normal form as read
	// (delimiters aside): the content hash covers the segments as they
	// are, so two Normal sets of one content hash read alike, element for
	// element. Set with ContentHash.
	Normal bool
	// SegmentCount is the number of segments read, ST and SE included.
	SegmentCount int
	// Errors are the set-level errors (reported in IK5, IK3).
	Errors []*ParseError
	// Warnings are the leniencies applied to ST and SE.
	Warnings []Warning
	Complete bool

	segs []Segment
}

// Valid reports whether the set is free of errors.
func (s *Set) Valid() bool { return len(s.Errors) == 0 }

// HashHex returns the content hash in hex.
func (s *Set) HashHex() string { return hex.EncodeToString(s.ContentHash[:]) }

// Segments returns the set's segments, ST to SE, when the Reader keeps them
// (Options.KeepSegments). They are valid until the Reader's next Next.
func (s *Set) Segments() []Segment { return s.segs }

// Reader reads interchanges from a stream. It is not safe for concurrent
// use.
type Reader struct {
	br   *bufio.Reader
	opts Options

	off      int64 // offset of the next unread byte
	segIndex int
	d        Delimiters

	started, eof, done, pending bool
	ended                       Kind
	x12                         bool
	fileKey                     string
	fileErrs                    []*ParseError
	stray                       bool // a run of stray segments is already reported
	strayErr                    *ParseError
	strayN                      int // stray segments after the one strayErr names
	strayID                     string
	fileWarns                   []Warning
	padWarned                   bool // the padding warning was given
	lenient                     ixLenient
	isaSeen                     map[string]*ctlSet // ISA13 per sender, for duplicates
	noTerm                      bool               // the last segment read had no terminator

	// the current segment
	seg     Segment
	segISA  bool
	nextISA isaHeader
	long    []byte // a segment longer than the bufio buffer
	longID  string // the identifier of the segment too long just read
	// fastLast is the last segment fastSet took (its raw bytes are gone
	// with the buffer): for the error of an interchange that ends there.
	fastLast struct {
		id    [3]byte
		n     int
		off   int64
		index int
	}
	wrapped []byte // a segment with line breaks removed

	ix  *Interchange
	g   *Group
	set *Set

	hs *setHasher
	// With KeepSegments: the current set's segment bytes and its segments,
	// which refer to them. Both are reused set after set.
	arena []byte
	segs  []Segment
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader, opts Options) *Reader {
	if opts.MaxSegment <= 0 {
		opts.MaxSegment = defaultMaxSegment
	}
	if opts.SearchWindow <= 0 {
		opts.SearchWindow = defaultWindow
	}
	return &Reader{
		br:   bufio.NewReaderSize(r, max(opts.SearchWindow, 64<<10)),
		opts: opts,
		hs:   newSetHasher(),
	}
}

// X12 reports whether the input holds a readable ISA header. Valid after the
// first call to Next.
func (r *Reader) X12() bool { return r.x12 }

// FileKey returns "sha256:{hex}" of the whole input when it is not X12, and
// "" otherwise. Valid once Next has returned io.EOF.
func (r *Reader) FileKey() string { return r.fileKey }

// FileErrors returns the errors that belong to no interchange.
func (r *Reader) FileErrors() []*ParseError { return r.fileErrs }

// FileWarnings returns the warnings that belong to no interchange: what
// was tolerated before the first ISA. Complete once Next returned io.EOF.
func (r *Reader) FileWarnings() []Warning { return r.fileWarns }

// Interchange returns the interchange being read, or the one just ended.
func (r *Reader) Interchange() *Interchange { return r.ix }

// Group returns the group being read, or the one just ended.
func (r *Reader) Group() *Group { return r.g }

// Set returns the transaction set just ended (after KindSet).
func (r *Reader) Set() *Set { return r.set }

// Offset returns the number of bytes consumed so far.
func (r *Reader) Offset() int64 { return r.off }

// Next reads until a transaction set, group or interchange ends and says
// which. It returns io.EOF at the end of the input; any other error comes
// from the underlying reader. Envelope errors are not returned: they are
// recorded on the interchange, group or set they belong to.
func (r *Reader) Next() (Kind, error) {
	if !r.started {
		r.started = true
		if err := r.start(); err != nil {
			return 0, err
		}
	}
	// The level that ended on the previous call is let go now.
	switch r.ended {
	case KindSet:
		r.set = nil
	case KindGroupEnd:
		r.g = nil
	case KindInterchangeEnd:
		r.ix = nil
	}
	r.ended = 0
	for {
		if r.done {
			return 0, io.EOF
		}
		if r.set != nil && !r.pending && !r.eof && r.opts.Trace == nil {
			r.fastSet()
		}
		if !r.pending && !r.eof {
			if err := r.read(); err == io.EOF {
				r.eof = true
			} else if err != nil {
				return 0, err
			} else if r.opts.Trace != nil && !isTooLong(r.seg) {
				r.opts.Trace(r.seg)
			}
		}
		r.pending = false
		if r.eof {
			switch {
			case r.set != nil:
				return r.endSet(false), nil
			case r.g != nil:
				return r.endGroup(false), nil
			case r.ix != nil:
				return r.endInterchange(false), nil
			}
			r.done = true
			return 0, io.EOF
		}
		if k := r.handle(); k != 0 {
			return k, nil
		}
	}
}

// start classifies the input before the first segment: UTF-16, binary, no
// ISA at all (keyed by the SHA-256 of its bytes), or X12 with the ISA at the
// start or behind some leading text.
func (r *Reader) start() error {
	b, err := r.br.Peek(r.opts.SearchWindow)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return err
	}
	if looksUTF16(b) {
		return r.notX12(ErrUTF16, "")
	}
	i := 0
	if bytes.HasPrefix(b, []byte("\xEF\xBB\xBF")) {
		i = 3
	}
	ws := i
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	bom, lead := ws == 3, i-ws
	if len(b) == 0 {
		return r.notX12(ErrNotX12, "empty file")
	}
	if bytes.HasPrefix(b[i:], []byte("ISA")) {
		if _, cause, detail := parseISA(b[i:]); cause != nil {
			return r.notX12(cause, detail)
		}
	} else {
		found := -1
		for j := i; ; {
			k := bytes.Index(b[j:], []byte("ISA"))
			if k < 0 {
				break
			}
			if _, cause, _ := parseISA(b[j+k:]); cause == nil {
				found = j + k
				break
			}
			j += k + 1
		}
		if found < 0 {
			if isBinary(b) {
				return r.notX12(ErrBinary, "")
			}
			return r.notX12(ErrNotX12, fmt.Sprintf("no ISA header in the first %d bytes", len(b)))
		}
		r.fileErrs = append(r.fileErrs, &ParseError{Cause: ErrDataBeforeISA,
			Detail: fmt.Sprintf("%d bytes before the ISA", found)})
		i = found
	}
	r.x12 = true
	if bom {
		r.fileWarns = append(r.fileWarns, Warning{Code: WarnUTF8BOM, Segment: 1,
			Message: "the file starts with a UTF-8 byte order mark (EF BB BF), skipped"})
	}
	if lead > 0 {
		r.fileWarns = append(r.fileWarns, Warning{Code: WarnLeadingWhitespace, Offset: int64(ws), Segment: 1,
			Message: fmt.Sprintf("%s of whitespace before the ISA, skipped", plural(lead, "byte", "bytes"))})
	}
	if _, err := r.br.Discard(i); err != nil {
		return err
	}
	r.off = int64(i)
	return nil
}

// notX12 records why the input is not X12 and keys it by the SHA-256 of all
// its bytes. Nothing has been consumed yet, so the hash covers the whole
// input.
func (r *Reader) notX12(cause *Cause, detail string) error {
	r.fileErrs = append(r.fileErrs, &ParseError{Cause: cause, Detail: detail})
	h := sha256.New()
	n, err := io.Copy(h, r.br)
	if err != nil {
		return err
	}
	r.off = n
	r.fileKey = "sha256:" + hex.EncodeToString(h.Sum(nil))
	r.done = true
	return nil
}

func looksUTF16(b []byte) bool {
	if bytes.HasPrefix(b, []byte{0xFF, 0xFE}) || bytes.HasPrefix(b, []byte{0xFE, 0xFF}) {
		return true
	}
	// ASCII text in UTF-16 has a NUL in every other byte.
	if len(b) < 8 {
		return false
	}
	evenNul, oddNul := 0, 0
	for i := 0; i < 8; i++ {
		if b[i] == 0 {
			if i%2 == 0 {
				evenNul++
			} else {
				oddNul++
			}
		}
	}
	return evenNul == 4 && oddNul == 0 || oddNul == 4 && evenNul == 0
}

func isBinary(b []byte) bool {
	n := min(len(b), 4096)
	bad := 0
	for _, c := range b[:n] {
		if c == 0 || c < 0x20 && !isSpace(c) && c != 0x1C && c != 0x1D && c != 0x1E && c != 0x1F && c != 0x07 {
			bad++
		}
	}
	return bad > 0 && bad*20 > n || bytes.IndexByte(b[:n], 0) >= 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// warnPadding notes, once per file, NUL or DOS end-of-file (0x1A) bytes
// skipped at off outside any interchange: the padding of a fixed-block
// transfer, or an end-of-file mark, after or between interchanges. They
// are skipped as whitespace is at a segment start.
func (r *Reader) warnPadding(off int64) {
	if r.padWarned {
		return
	}
	r.padWarned = true
	r.fileWarns = append(r.fileWarns, Warning{Code: WarnPadding, Offset: off, Segment: r.segIndex + 1,
		Message: "NUL or DOS end-of-file (0x1A) padding outside any interchange, skipped"})
}

// read reads the next segment into r.seg. At an ISA it first reads the
// header, so the segment is read with the delimiters it declares.
func (r *Reader) read() error {
	for {
		err := r.readOne()
		if err != errEmpty {
			return err
		}
		if r.ix != nil {
			if r.lenient.empty == 0 {
				r.lenient.emptyOff, r.lenient.emptySeg = r.off-1, r.segIndex+1
			}
			r.lenient.empty++
		}
	}
}

// errEmpty reports an empty segment (two terminators in a row): skipped,
// like a blank line, and not counted.
var errEmpty = errors.New("empty segment")

func (r *Reader) readOne() error {
	var b []byte
	stripped := false
	for {
		var err error
		b, err = r.br.Peek(4)
		n := 0
		// Whitespace at a segment start is never content: line breaks
		// after terminators, indentation, blank lines when the
		// terminator is itself a newline.
		pad := 0
		for n < len(b) && (isSpace(b[n]) || r.ix == nil && (b[n] == 0 || b[n] == 0x1A)) {
			if !isSpace(b[n]) {
				pad++
			}
			n++
		}
		if pad > 0 {
			r.warnPadding(r.off)
		}
		if n > 0 {
			if r.ix != nil {
				r.lenient.ws.add(r.off, r.segIndex, n)
			}
			r.br.Discard(n)
			r.off += int64(n)
			continue
		}
		// The stray byte of a leading-punctuation interchange is part
		// of its terminator, not of the segment.
		if !stripped && r.lenient.lead != 0 && len(b) > 0 && b[0] == r.lenient.lead {
			stripped = true
			r.lenient.leadN++
			r.br.Discard(1)
			r.off++
			continue
		}
		if len(b) == 0 {
			if err == nil {
				err = io.EOF
			}
			return err
		}
		break
	}
	r.segISA = false
	// A segment whose identifier is ISA starts an interchange: its header
	// must declare the delimiters, or it is reported.
	if b[0] == 'I' && r.startsISA() {
		hb, err := r.br.Peek(isaMaxLen)
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return err
		}
		h, cause, detail := parseISA(hb)
		if cause == nil {
			r.nextISA = h
			r.segISA = true
			r.d = h.d
		} else if r.d.Segment == 0 {
			// Without delimiters the rest cannot be read.
			r.addFileErr(&ParseError{Offset: r.off, Segment: r.segIndex + 1, Cause: cause, Detail: detail})
			_, err := io.Copy(io.Discard, r.br)
			return err
		} else {
			r.addFileErr(&ParseError{Offset: r.off, Segment: r.segIndex + 1, Cause: cause, Detail: detail})
		}
	}
	return r.readSegment()
}

// startsISA reports whether the next segment's identifier is ISA, looking
// through line breaks (a file wrapped at a fixed width may break one inside
// "ISA").
func (r *Reader) startsISA() bool {
	b, _ := r.br.Peek(16)
	id := make([]byte, 0, 4)
	for _, c := range b {
		if c == r.d.Segment {
			break
		}
		if c == '\n' || c == '\r' {
			continue
		}
		id = append(id, c)
		if len(id) == 4 {
			break
		}
	}
	return len(id) >= 3 && string(id[:3]) == "ISA" && (len(id) == 3 || !isAlnum(id[3]))
}

// readSegment reads up to the segment terminator. A segment longer than
// MaxSegment is consumed and discarded, and reported as ErrSegmentTooLong
// through a segment with the placeholder identifier "\x00".
func (r *Reader) readSegment() error {
	off := r.off
	line, err := r.br.ReadSlice(r.d.Segment)
	r.off += int64(len(line))
	over := len(line) > r.opts.MaxSegment+1
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = r.br.ReadSlice(r.d.Segment)
			r.off += int64(len(line))
			if over = over || len(r.long)+len(line) > r.opts.MaxSegment+1; !over {
				r.long = append(r.long, line...)
			}
		}
		line = r.long
	}
	if err != nil && err != io.EOF {
		return err
	}
	if over {
		r.segIndex++
		r.seg = Segment{raw: tooLong, d: r.d, Offset: off, Index: r.segIndex}
		// Its identifier, for the 999's IK3: line holds its first bytes.
		r.longID = ""
		if i := bytes.IndexByte(line[:min(len(line), 4)], r.d.Element); i > 0 {
			r.longID = safeID(line[:i])
		}
		return nil
	}
	if len(line) == 0 {
		return io.EOF
	}
	r.noTerm = true
	if n := len(line); line[n-1] == r.d.Segment && err == nil {
		r.noTerm = false
		line = line[:n-1]
		if n == 1 {
			return errEmpty
		}
	}
	// CR and LF are never X12 data: they are line breaks of files wrapped
	// at a fixed width, or the other half of a CR LF pair when the
	// terminator is one of them.
	if bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
		// Counted as fastSet counts them: segments with an LF inside.
		if r.ix != nil && !r.segISA && bytes.IndexByte(line, '\n') >= 0 {
			if r.lenient.wrapped == 0 {
				r.lenient.wrapOff, r.lenient.wrapSeg = off, r.segIndex+1
			}
			r.lenient.wrapped++
		}
		r.wrapped = r.wrapped[:0]
		for _, c := range line {
			if c != '\n' && c != '\r' {
				r.wrapped = append(r.wrapped, c)
			}
		}
		line = r.wrapped
		if len(line) == 0 {
			return errEmpty
		}
	}
	r.segIndex++
	r.seg = Segment{raw: line, d: r.d, Offset: off, Index: r.segIndex}
	return nil
}

// tooLong stands in for a discarded oversize segment.
var tooLong = []byte{0}

func isTooLong(s Segment) bool { return len(s.raw) == 1 && s.raw[0] == 0 }

// segment identifiers, as compared without allocating.
func idIs(id []byte, s string) bool { return string(id) == s }

// handle applies the current segment to the open levels and returns the kind
// of level it completed, or 0.
func (r *Reader) handle() Kind {
	seg := r.seg
	if isTooLong(seg) {
		r.oversize(seg)
		return 0
	}
	id := seg.id()
	if r.set != nil {
		switch {
		case idIs(id, "SE"):
			r.addToSet(seg)
			return r.endSet(true)
		case r.segISA || idIs(id, "ST") || idIs(id, "GE") || idIs(id, "GS") || idIs(id, "IEA"):
			r.pending = true
			return r.endSet(false)
		}
		r.addToSet(seg)
		if !validID(id) {
			r.setErr(seg, ErrSegmentID, "")
		}
		return 0
	}
	if r.g != nil {
		switch {
		case idIs(id, "ST"):
			r.endStray()
			r.startSet(seg)
			return 0
		case idIs(id, "GE"):
			r.endStray()
			return r.endGroup(true)
		case r.segISA || idIs(id, "GS") || idIs(id, "IEA"):
			r.pending = true
			return r.endGroup(false)
		}
		if r.stray {
			r.moreStray()
		} else {
			r.startStray(seg, r.groupErr(seg, ErrOutsideSet, ""))
		}
		return 0
	}
	if r.ix != nil {
		switch {
		case idIs(id, "GS"):
			r.endStray()
			r.startGroup(seg)
			return 0
		case idIs(id, "TA1"):
			r.endStray()
			r.addTA1(seg)
			return 0
		case idIs(id, "IEA"):
			r.endStray()
			return r.endInterchange(true)
		case r.segISA:
			r.pending = true
			return r.endInterchange(false)
		}
		if r.stray {
			r.moreStray()
		} else {
			r.startStray(seg, r.ixErr(seg, ErrOutsideGroup, ""))
		}
		return 0
	}
	if r.segISA {
		r.endStray()
		r.startInterchange(seg)
		return 0
	}
	if r.stray {
		r.moreStray()
	} else {
		e := &ParseError{Offset: seg.Offset, Segment: seg.Index, SegmentID: safeID(seg.id()), Cause: ErrOutsideInterchange}
		if len(r.fileErrs) < maxErrors {
			r.fileErrs = append(r.fileErrs, e)
		} else {
			e = nil
		}
		r.startStray(seg, e)
	}
	return 0
}

func (r *Reader) addTA1(seg Segment) {
	t := TA1{ControlNumber: seg.Str(1), Date: seg.Str(2), Time: seg.Str(3), AckCode: seg.Str(4), NoteCode: seg.Str(5)}
	r.ix.TA1 = append(r.ix.TA1, t)
	switch {
	case len(t.ControlNumber) != 9 || !isDigits([]byte(t.ControlNumber)):
		r.ixErr(seg, ErrTA1Syntax, "TA101="+quoteCtl(t.ControlNumber))
	case t.AckCode != "A" && t.AckCode != "E" && t.AckCode != "R":
		r.ixErr(seg, ErrTA1Syntax, "TA104="+quoteCtl(t.AckCode))
	case len(t.NoteCode) != 3 || !isDigits([]byte(t.NoteCode)):
		r.ixErr(seg, ErrTA1Syntax, "TA105="+quoteCtl(t.NoteCode))
	}
}

func (r *Reader) oversize(seg Segment) {
	e := &ParseError{Offset: seg.Offset, Segment: seg.Index, Cause: ErrSegmentTooLong, SegmentID: r.longID,
		Detail: fmt.Sprintf("limit %d bytes", r.opts.MaxSegment)}
	switch {
	case r.set != nil:
		// In a set it is the set's error, answered in its 999 (IK3 with
		// the segment's place, IK5 R 5), not a TA105 code.
		r.set.SegmentCount++
		e.Cause, e.Position, e.SegmentID = ErrSetSegmentTooLong, r.set.SegmentCount, r.longID
		if len(r.set.Errors) < maxErrors {
			r.set.Errors = append(r.set.Errors, e)
		}
		r.nestErr(2)
	case r.ix != nil:
		if len(r.ix.Errors) < maxErrors {
			r.ix.Errors = append(r.ix.Errors, e)
		}
	default:
		r.addFileErr(e)
	}
}

// validID reports whether id is a well-formed segment identifier: two or
// three upper-case letters and digits, starting with a letter.
func validID(id []byte) bool {
	if len(id) < 2 || len(id) > 3 || id[0] < 'A' || id[0] > 'Z' {
		return false
	}
	for _, c := range id[1:] {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (r *Reader) addFileErr(e *ParseError) {
	if len(r.fileErrs) < maxErrors {
		r.fileErrs = append(r.fileErrs, e)
	}
}

func (r *Reader) ixErr(seg Segment, c *Cause, detail string) *ParseError {
	if len(r.ix.Errors) < maxErrors {
		e := &ParseError{Offset: seg.Offset, Segment: seg.Index,
			SegmentID: safeID(seg.id()), Cause: c, Detail: detail}
		r.ix.Errors = append(r.ix.Errors, e)
		return e
	}
	return nil
}

func (r *Reader) groupErr(seg Segment, c *Cause, detail string) *ParseError {
	r.ix.nested++
	if len(r.g.Errors) < maxErrors {
		e := &ParseError{Offset: seg.Offset, Segment: seg.Index,
			SegmentID: safeID(seg.id()), Cause: c, Detail: detail}
		r.g.Errors = append(r.g.Errors, e)
		return e
	}
	return nil
}

// startStray begins a run of segments outside their envelope, reported by
// one error e (nil when the errors are full) that counts the rest of the
// run and names the delimiters the segments were read with.
func (r *Reader) startStray(seg Segment, e *ParseError) {
	r.stray, r.strayErr, r.strayN = true, e, 0
	if e == nil {
		return
	}
	r.strayID = ""
	if e.SegmentID == "" {
		r.strayID = "identifier " + shownID(seg.id())
	}
	r.strayDetail()
}

// moreStray counts one more segment of the current run.
func (r *Reader) moreStray() {
	r.strayN++
	if r.strayErr != nil {
		r.strayDetail()
	}
}

func (r *Reader) strayDetail() {
	d := r.strayID
	if r.strayN > 0 {
		more := strconv.Itoa(r.strayN) + " more segment"
		if r.strayN > 1 {
			more += "s"
		}
		if d != "" {
			d += ", and " + more
		} else {
			d = more + " after it"
		}
	}
	if r.ix != nil {
		if d != "" {
			d += "; "
		}
		d += describeDelims(r.d, r.ix.crlf)
	}
	r.strayErr.Detail = d
}

func (r *Reader) endStray() { r.stray, r.strayErr, r.strayN = false, nil, 0 }

// shownID quotes an identifier that safeID refuses, when it is short and
// printable (a mangled "~GS"); it never shows segment content.
func shownID(id []byte) string {
	if len(id) == 0 || len(id) > 4 {
		return "(unreadable)"
	}
	for _, c := range id {
		if c <= ' ' || c >= 0x7F {
			return "(unreadable)"
		}
	}
	return strconv.Quote(string(id))
}

// warnIx adds an interchange warning.
func (r *Reader) warnIx(code string, off int64, seg int, msg string) {
	if len(r.ix.Warnings) < maxErrors {
		r.ix.Warnings = append(r.ix.Warnings, Warning{Code: code, Message: msg, Offset: off, Segment: seg})
	}
}

func (r *Reader) setErr(seg Segment, c *Cause, detail string) {
	if len(r.set.Errors) < maxErrors {
		r.set.Errors = append(r.set.Errors, &ParseError{Offset: seg.Offset, Segment: seg.Index,
			Position: r.set.SegmentCount, SegmentID: safeID(seg.id()), Cause: c, Detail: detail})
	}
	r.nestErr(2)
}

// nestErr counts an error of a set (depth 2) or group (depth 1) in the
// levels above it.
func (r *Reader) nestErr(depth int) {
	if depth == 2 {
		r.g.nested++
	}
	r.ix.nested++
}

// safeID returns a segment identifier fit to show: identifiers only, never
// content that a broken delimiter let into the identifier position.
func safeID(id []byte) string {
	if len(id) > 3 {
		return ""
	}
	for _, c := range id {
		if !isAlnum(c) {
			return ""
		}
	}
	return string(id)
}

func (r *Reader) startInterchange(seg Segment) {
	h := r.nextISA
	e := &h.elems
	str := func(i int) string { return string(bytes.Trim(e[i], " ")) }
	ix := &Interchange{
		Offset: seg.Offset, Segment: seg.Index,
		Delimiters: h.d, Canonical: h.canonical,
		SenderQualifier: str(5), SenderID: str(6),
		ReceiverQualifier: str(7), ReceiverID: str(8),
		Date: str(9), Time: str(10), Standards: str(11), Version: str(12),
		ControlNumber: str(13), AckRequested: str(14) == "1", Usage: str(15),
	}
	r.ix = ix
	d := h.d
	ix.key = "x12:" + keyVal(ix.Usage, d) + ":" + keyVal(ix.SenderQualifier, d) + ":" + keyVal(ix.SenderID, d) +
		":" + keyVal(ix.ReceiverQualifier, d) + ":" + keyVal(ix.ReceiverID, d) + ":" + keyVal(padISA13(ix.ControlNumber), d)
	r.lenient = ixLenient{}
	r.noTerm = false
	// The parties: an interchange with no sender or receiver cannot be
	// keyed apart from another's, nor answered. A qualifier is two letters
	// or digits, an id anything but blank.
	if len(ix.SenderQualifier) != 2 || !isAlnum(ix.SenderQualifier[0]) || !isAlnum(ix.SenderQualifier[1]) {
		r.ixErr(seg, ErrISASenderQual, "ISA05="+quoteCtl(ix.SenderQualifier))
	}
	if ix.SenderID == "" {
		r.ixErr(seg, ErrISASenderID, "ISA06 is blank")
	}
	if len(ix.ReceiverQualifier) != 2 || !isAlnum(ix.ReceiverQualifier[0]) || !isAlnum(ix.ReceiverQualifier[1]) {
		r.ixErr(seg, ErrISAReceiverQual, "ISA07="+quoteCtl(ix.ReceiverQualifier))
	}
	if ix.ReceiverID == "" {
		r.ixErr(seg, ErrISAReceiverID, "ISA08 is blank")
	}
	// ISA13, ISA09 and ISA10 are each checked: a TA1 names the first, the
	// report all of them.
	if !isDigits([]byte(ix.ControlNumber)) || len(ix.ControlNumber) > 9 {
		r.ixErr(seg, ErrISAControlNumber, "ISA13="+quoteCtl(ix.ControlNumber))
	} else {
		if r.isaSeen == nil {
			r.isaSeen = make(map[string]*ctlSet, 1)
		}
		cs := r.isaSeen[ix.Sender()]
		if cs == nil {
			cs = &ctlSet{}
			r.isaSeen[ix.Sender()] = cs
		}
		if cs.add(padISA13(ix.ControlNumber)) {
			r.ixErr(seg, ErrISADuplicate, "ISA13="+quoteCtl(ix.ControlNumber)+" from "+quoteCtl(ix.Sender()))
		}
	}
	if !validDate(ix.Date) {
		r.ixErr(seg, ErrISADate, "ISA09="+quoteCtl(ix.Date)+" is not a YYMMDD date")
	}
	if !validTime(ix.Time) {
		r.ixErr(seg, ErrISATime, "ISA10="+quoteCtl(ix.Time)+" is not an HHMM time")
	}
	if v := str(14); v != "0" && v != "1" {
		r.ixErr(seg, ErrISAAckRequested, "ISA14="+quoteCtl(v))
	}
	if ix.Usage != "P" && ix.Usage != "T" && ix.Usage != "I" {
		r.ixErr(seg, ErrISAUsage, "ISA15="+quoteCtl(ix.Usage))
	}
	if len(ix.Version) != 5 || !isDigits([]byte(ix.Version)) {
		r.ixErr(seg, ErrISAVersion, "ISA12="+quoteCtl(ix.Version))
	}
	r.isaWarnings(seg, &h)
}

// isaWarnings reports what was tolerated in the ISA header, and looks at
// what follows it: a CR LF terminator, or a stray byte before every segment.
func (r *Reader) isaWarnings(seg Segment, h *isaHeader) {
	ix := r.ix
	if h.wrapped {
		r.warnIx(WarnISALineBreaks, seg.Offset, seg.Index,
			"the ISA header holds line breaks (a file wrapped at a fixed width); they were removed")
	}
	if !h.canonical {
		if d := isaWidthDetail(h); d != "" {
			r.warnIx(WarnISAFieldWidth, seg.Offset, seg.Index,
				"ISA fields are not their fixed width, read by counting separators: "+d)
		}
	}
	b, _ := r.br.Peek(32)
	if len(b) > 0 && h.d.Segment == '\r' && b[0] == '\n' {
		ix.crlf = true
	}
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if b = b[i:]; len(b) == 0 || isAlnum(b[0]) || isSpace(b[0]) || b[0] == h.d.Element {
		return
	}
	// CR and LF are never data: they are removed from inside a segment,
	// so "~\nGS" is read as "~GS" is, unless the line break is the
	// terminator ("~" is then a segment of its own).
	id := make([]byte, 0, 5)
	for _, c := range b[1:] {
		if c == h.d.Segment {
			break
		}
		if c == '\n' || c == '\r' {
			continue
		}
		if id = append(id, c); len(id) == 5 {
			break
		}
	}
	if len(id) >= 3 && string(id[:2]) == "GS" && id[2] == h.d.Element || len(id) >= 4 &&
		(string(id[:3]) == "TA1" || string(id[:3]) == "IEA") && id[3] == h.d.Element {
		r.lenient.lead = b[0]
	}
}

// lenientWarnings reports, at the end of an interchange, what was
// tolerated in its segments.
func (r *Reader) lenientWarnings() {
	l := &r.lenient
	d := r.d
	if l.lead != 0 {
		r.warnIx(WarnLeadingPunctuation, r.ix.Offset, r.ix.Segment, fmt.Sprintf(
			"every segment after the ISA begins with %s before its identifier (%d segments; segment terminator %s): the byte was read as part of the terminator",
			printableDelim(l.lead, false), l.leadN, printableDelim(d.Segment, r.ix.crlf)))
	}
	if l.ws.bytes > 0 {
		if r.ix.crlf {
			r.warnIx(WarnCRLFTerminator, l.ws.first, l.ws.seg, fmt.Sprintf(
				"segments end with CR LF: the LF after each terminator CR was skipped (%d bytes)", l.ws.bytes))
		} else {
			r.warnIx(WarnLineBreaks, l.ws.first, l.ws.seg, fmt.Sprintf(
				"%s of line breaks or spaces between segments, after the terminator %s, skipped",
				plural(int(l.ws.bytes), "byte", "bytes"), printableDelim(d.Segment, false)))
		}
	}
	if l.wrapped > 0 {
		r.warnIx(WarnSegmentLineBreaks, l.wrapOff, l.wrapSeg, fmt.Sprintf(
			"%s line breaks (wrapped lines), removed", plural(l.wrapped, "segment holds", "segments hold")))
	}
	if l.empty > 0 {
		r.warnIx(WarnEmptySegment, l.emptyOff, l.emptySeg, fmt.Sprintf(
			"%s (two terminators %s in a row) %s skipped", plural(l.empty, "empty segment", "empty segments"),
			printableDelim(d.Segment, false), map[bool]string{true: "was", false: "were"}[l.empty == 1]))
	}
}

func (r *Reader) endInterchange(trailer bool) Kind {
	ix := r.ix
	if trailer {
		seg := r.seg
		ix.Complete = true
		if n := seg.Str(1); !numEqual(n, ix.GroupCount) {
			r.ixErr(seg, ErrIEAGroupCount, fmt.Sprintf("IEA01=%s, counted %d", quoteCtl(n), ix.GroupCount))
		}
		if c := seg.Str(2); padISA13(c) != padISA13(ix.ControlNumber) {
			r.ixErr(seg, ErrIEAControlNumber, fmt.Sprintf("IEA02=%s, ISA13=%s", quoteCtl(c), quoteCtl(ix.ControlNumber)))
		} else if c != ix.ControlNumber {
			r.warnIx(WarnIEA02Zeros, seg.Offset, seg.Index, fmt.Sprintf(
				"IEA02=%s matches ISA13=%s only when leading zeros are ignored", quoteCtl(c), quoteCtl(ix.ControlNumber)))
		}
		r.lenientWarnings()
		if r.noTerm {
			r.warnIx(WarnFinalTerminator, seg.Offset, seg.Index, "the IEA ends the file without a segment terminator")
		}
	} else {
		r.lenientWarnings()
		if len(ix.Errors) < maxErrors {
			ix.Errors = append(ix.Errors, &ParseError{Offset: r.endOffset(), Segment: r.endIndex(), Cause: ErrIEAMissing,
				Detail: r.ieaMissing()})
		}
	}
	r.ended = KindInterchangeEnd
	return KindInterchangeEnd
}

// ieaMissing says how an interchange ended without its IEA: at the end of
// the file after the segment last read (cut off, or an IEA inside that
// segment: the segments from there on are not ended by the interchange's
// terminator, which changed), or at the next ISA; then the delimiters.
func (r *Reader) ieaMissing() string {
	last := r.seg
	delims := describeDelims(r.d, r.ix.crlf)
	if !r.eof {
		return fmt.Sprintf("segment %d (offset %d) begins another interchange; %s", last.Index, last.Offset, delims)
	}
	if f := r.fastLast; f.index > last.Index {
		return fmt.Sprintf("the file ends after segment %d %s (offset %d): cut off; %s", f.index, safeID(f.id[:f.n]), f.off, delims)
	}
	id := safeID(last.id())
	if id == "" {
		id = "with an unreadable identifier"
	}
	if k := bytes.Index(last.raw, []byte{'I', 'E', 'A', r.d.Element}); k > 0 {
		return fmt.Sprintf("an IEA is inside segment %d %s (offset %d), %d bytes in: the segments from offset %d on are not ended by the terminator %s (it changed there, or was dropped); %s",
			last.Index, id, last.Offset, k, last.Offset, printableDelim(r.d.Segment, r.ix.crlf), delims)
	}
	return fmt.Sprintf("the file ends after segment %d %s (offset %d): cut off; %s", last.Index, id, last.Offset, delims)
}

func (r *Reader) startGroup(seg Segment) {
	ix := r.ix
	ix.GroupCount++
	g := &Group{
		Offset: seg.Offset, Segment: seg.Index,
		DeclaredSets: -1,
		FunctionalID: seg.Str(1), SenderCode: seg.Str(2), ReceiverCode: seg.Str(3),
		Date: seg.Str(4), Time: seg.Str(5), ControlNumber: seg.Str(6), Agency: seg.Str(7), Version: seg.Str(8),
	}
	r.g = g
	ctl := trimZeros(g.ControlNumber)
	g.key = ix.key + ":" + keyVal(g.SenderCode, r.d) + ":" + keyVal(g.ReceiverCode, r.d) + ":" + keyVal(ctl, r.d)
	switch {
	case g.FunctionalID == "":
		// AK905 1: a group of no functional identifier is of none we
		// support; 2: of no version, of no version we support.
		r.groupErr(seg, ErrGSFunctionalID, "GS01 is empty")
	case !isDigits([]byte(g.ControlNumber)) || len(g.ControlNumber) > 9:
		r.groupErr(seg, ErrGSSyntax, "GS06="+quoteCtl(g.ControlNumber))
	case g.Version == "":
		r.groupErr(seg, ErrGSVersion, "GS08 is empty")
	}
	if ix.gs06Seen.add(ctl) {
		r.groupErr(seg, ErrGSDuplicate, "GS06="+quoteCtl(g.ControlNumber))
	}
	r.paddingWarning(seg, WarnGroupPadding, 1, 2, 3, 6, 8)
}

func (r *Reader) warnGroup(seg Segment, code, msg string) {
	if len(r.g.Warnings) < maxErrors {
		r.g.Warnings = append(r.g.Warnings, Warning{Code: code, Message: msg, Offset: seg.Offset, Segment: seg.Index})
	}
}

// paddingWarning reports the envelope elements of seg that carry spaces
// around their value, which the Reader trims, at the group (GS, GE) or set
// (ST, SE) level.
func (r *Reader) paddingWarning(seg Segment, code string, elems ...int) {
	var padded []byte
	for _, i := range elems {
		if v := seg.Elem(i); len(v) > 0 && (v[0] == ' ' || v[len(v)-1] == ' ') {
			if padded != nil {
				padded = append(padded, ", "...)
			}
			padded = fmt.Appendf(padded, "%s%02d", seg.id(), i)
		}
	}
	if padded == nil {
		return
	}
	w := Warning{Code: code, Offset: seg.Offset, Segment: seg.Index,
		Message: "spaces around " + string(padded) + " were trimmed"}
	if code == WarnSetPadding {
		if len(r.set.Warnings) < maxErrors {
			r.set.Warnings = append(r.set.Warnings, w)
		}
	} else if len(r.g.Warnings) < maxErrors {
		r.g.Warnings = append(r.g.Warnings, w)
	}
}

func (r *Reader) endGroup(trailer bool) Kind {
	g := r.g
	if trailer {
		seg := r.seg
		g.Complete = true
		if n, ok := count(seg.Str(1)); ok {
			g.DeclaredSets = n
		}
		if n := seg.Str(1); !numEqual(n, g.SetCount) {
			r.groupErr(seg, ErrGESetCount, fmt.Sprintf("GE01=%s, counted %d", quoteCtl(n), g.SetCount))
		}
		if c := seg.Str(2); trimZeros(c) != trimZeros(g.ControlNumber) {
			r.groupErr(seg, ErrGEControlNumber, fmt.Sprintf("GE02=%s, GS06=%s", quoteCtl(c), quoteCtl(g.ControlNumber)))
		} else if c != g.ControlNumber {
			r.warnGroup(seg, WarnGE02Zeros, fmt.Sprintf(
				"GE02=%s matches GS06=%s only when leading zeros are ignored", quoteCtl(c), quoteCtl(g.ControlNumber)))
		}
		r.paddingWarning(seg, WarnGroupPadding, 1, 2)
	} else {
		if len(g.Errors) < maxErrors {
			g.Errors = append(g.Errors, &ParseError{Offset: r.endOffset(), Segment: r.endIndex(), Cause: ErrGEMissing})
		}
		r.ix.nested++
	}
	r.ended = KindGroupEnd
	return KindGroupEnd
}

func (r *Reader) startSet(seg Segment) {
	g := r.g
	g.SetCount++
	s := &Set{Offset: seg.Offset, Segment: seg.Index}
	if impl := bytes.Trim(seg.Elem(3), " "); len(impl) > 0 {
		s.Implementation = string(impl)
	}
	typ, ctl := bytes.Trim(seg.Elem(1), " "), bytes.Trim(seg.Elem(2), " ")
	if keyClean(typ, r.d) && keyClean(ctl, r.d) {
		// The key holds ST01 and ST02 as they are: one string serves all
		// three.
		s.Key = g.key + ":" + string(typ) + ":" + string(ctl)
		at := len(g.key) + 1
		s.Type, s.ControlNumber = s.Key[at:at+len(typ)], s.Key[len(s.Key)-len(ctl):]
	} else {
		s.Type, s.ControlNumber = string(typ), string(ctl)
		s.Key = g.key + ":" + keyVal(s.Type, r.d) + ":" + keyVal(s.ControlNumber, r.d)
	}
	r.set = s
	if !r.opts.NoContentHash {
		r.hs.reset(r.d)
	}
	r.arena = r.arena[:0]
	r.segs = r.segs[:0]
	r.addToSet(seg)
	if len(s.Type) != 3 || !isAlnum(s.Type[0]) {
		r.setErr(seg, ErrSTType, "ST01="+quoteCtl(s.Type))
	}
	if n := len(s.ControlNumber); n < 4 || n > 9 {
		r.setErr(seg, ErrSTControlNumber, "ST02="+quoteCtl(s.ControlNumber))
	}
	if g.stSeen.add(s.ControlNumber) {
		r.setErr(seg, ErrSTDuplicate, "ST02="+quoteCtl(s.ControlNumber))
	}
	r.paddingWarning(seg, WarnSetPadding, 1, 2)
}

// addToSet counts, hashes and (with KeepSegments) keeps a segment of the
// current set.
func (r *Reader) addToSet(seg Segment) {
	r.set.SegmentCount++
	trig := hasTrigger(seg.raw)
	if trig {
		r.checkCharacters(seg.raw, seg.Offset, seg.Index, r.set.SegmentCount)
	}
	if !r.opts.NoContentHash {
		r.hs.addChecked(seg.raw, trig)
	}
	if r.opts.KeepSegments {
		r.keep(seg.raw, seg.Offset, seg.Index)
	}
}

func (r *Reader) keep(raw []byte, off int64, index int) {
	if len(r.arena)+len(raw) > cap(r.arena) {
		r.growArena(len(raw))
	}
	start := len(r.arena)
	r.arena = append(r.arena, raw...)
	r.segs = append(r.segs, Segment{raw: r.arena[start:len(r.arena):len(r.arena)], d: r.d, Offset: off, Index: index})
}

// growArena starts a new arena with room for n more bytes. The kept
// segments stay where they are: an arena is only ever appended to, so the
// old one, held by them, is never written again.
func (r *Reader) growArena(n int) {
	r.arena = make([]byte, 0, max(2*cap(r.arena), n, 4096))
}

// fastSet consumes, straight from the read buffer, the segments of the
// current set that need nothing but counting and hashing: complete
// segments whose valid identifier is not an envelope identifier. It stops
// at the first segment that needs more, which the general path then reads.
// It must agree exactly with readOne, handle and addToSet for the segments
// it takes; FuzzReader compares the two paths (Trace disables this one).
func (r *Reader) fastSet() {
	buf, _ := r.br.Peek(r.br.Buffered())
	term, es := r.d.Segment, r.d.Element
	keep, hash := r.opts.KeepSegments, !r.opts.NoContentHash
	hs := r.hs
	canon, out := hs.canonical, hs.out // out is stored back below
	taken := 0
	i, last := 0, 0
	// The whitespace between segments, in one counter: its bytes in the
	// low 32 bits, its LFs (for the wrapped segments, below) above.
	ws := 0
	for i < len(buf) {
		if c := buf[i]; isSpace(c) {
			// Of the four whitespace bytes only LF (0x0A) has bit 1 set.
			ws += 1 + int(c>>1&1)<<32
			i++
			continue
		}
		j := bytes.IndexByte(buf[i:], term)
		if j < 2 {
			break
		}
		seg := buf[i : i+j]
		// The identifier must be valid (validID: two or three upper-case
		// letters and digits, then the element separator or the end) and
		// not an envelope identifier.
		if c := seg[0]; c < 'A' || c > 'Z' || !isUpperAlnum(seg[1]) ||
			len(seg) > 2 && seg[2] != es && (!isUpperAlnum(seg[2]) || len(seg) > 3 && seg[3] != es) ||
			(c == 'S' || c == 'G' || c == 'I' || c == 'T') && isEnvelopeID(seg, es) {
			break
		}
		// Kept segments must be free of line breaks; hashed ones are
		// stripped of them by the normalisation. A segment free of
		// trigger bytes holds none.
		// A trigger byte is also the only way a control character gets
		// in: only those segments are looked at for one.
		trig := hasTrigger(seg)
		if keep && trig && (bytes.IndexByte(seg, '\n') >= 0 || bytes.IndexByte(seg, '\r') >= 0) {
			break
		}
		if trig {
			r.checkCharacters(seg, r.off+int64(i), r.segIndex+taken+1, r.set.SegmentCount+taken+1)
		}
		if hash {
			if canon && !trig && seg[j-1] != '*' && len(out)+j < hashChunk {
				// Normal already: the segment and its terminator, '~'.
				out = append(out, buf[i:i+j+1]...)
			} else {
				hs.out = out
				hs.addChecked(seg, trig)
				out = hs.out
			}
		}
		taken++
		if keep {
			r.keep(seg, r.off+int64(i), r.segIndex+taken)
		}
		last = i
		i += j + 1
	}
	hs.out = out
	if taken > 0 {
		f := &r.fastLast
		seg := buf[last : i-1] // the last segment taken, without its terminator
		n := bytes.IndexByte(seg, es)
		if n < 0 || n > 3 {
			n = min(len(seg), 3)
		}
		f.n = copy(f.id[:], seg[:n])
		f.off, f.index = r.off+int64(last), r.segIndex+taken
	}
	if ws != 0 {
		r.wsTaken(buf[:i], ws&(1<<32-1))
	}
	// Every LF of the segments taken is whitespace between them, unless
	// some segment holds one: one count over the bytes taken tells, and
	// only then are the segments walked again to find them. Kept segments
	// never hold one: they go to the general path.
	if term != '\n' && !keep && taken > 0 && bytes.Count(buf[:i], []byte{'\n'}) > ws>>32 {
		r.countWrapped(buf[:i])
	}
	r.set.SegmentCount += taken
	r.segIndex += taken
	r.br.Discard(i)
	r.off += int64(i)
}

// checkCharacters records ErrInvalidCharacter for the set segment raw (at
// off, the index-th of the file, the pos-th of its set) when it holds a
// control character that is no delimiter, CR or LF: the first such byte,
// by its value and element, never the content around it.
func (r *Reader) checkCharacters(raw []byte, off int64, index, pos int) {
	d := r.d
	for i, c := range raw {
		if (c >= 0x20 && c != 0x7F) || c == '\r' || c == '\n' || c == d.Element || c == d.Component ||
			c == d.Segment || d.Repetition != 0 && c == d.Repetition {
			continue
		}
		elem := bytes.Count(raw[:i], []byte{d.Element})
		if len(r.set.Errors) < maxErrors {
			r.set.Errors = append(r.set.Errors, &ParseError{Offset: off + int64(i), Segment: index, Position: pos,
				SegmentID: safeID(Segment{raw: raw, d: d}.id()), Cause: ErrInvalidCharacter,
				Detail: fmt.Sprintf("byte 0x%02X in element %d, %d bytes into the segment", c, elem, i)})
		}
		r.nestErr(2)
		return
	}
}

// wsTaken records the n bytes of whitespace between the segments fastSet
// just took (b): it finds the first.
func (r *Reader) wsTaken(b []byte, n int) {
	for i, seg := 0, 0; i < len(b); seg++ {
		if isSpace(b[i]) {
			r.lenient.ws.add(r.off+int64(i), r.segIndex+seg, n)
			return
		}
		i += bytes.IndexByte(b[i:], r.d.Segment) + 1
	}
}

// countWrapped counts, in the segments fastSet just took (b, from r.off,
// the first numbered r.segIndex+1), those with an LF inside.
func (r *Reader) countWrapped(b []byte) {
	l := &r.lenient
	n := 0
	for i := 0; i < len(b); {
		if isSpace(b[i]) {
			i++
			continue
		}
		j := bytes.IndexByte(b[i:], r.d.Segment)
		n++
		if bytes.IndexByte(b[i:i+j], '\n') >= 0 {
			if l.wrapped == 0 {
				l.wrapOff, l.wrapSeg = r.off+int64(i), r.segIndex+n
			}
			l.wrapped++
		}
		i += j + 1
	}
}

func isUpperAlnum(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// isEnvelopeID reports whether seg starts with an identifier the state
// machine must see: ISA, IEA, GS, GE, ST, SE or TA1.
func isEnvelopeID(seg []byte, es byte) bool {
	if len(seg) < 2 {
		return false
	}
	at := func(n int) bool { return len(seg) == n || seg[n] == es }
	switch seg[0] {
	case 'S':
		return (seg[1] == 'E' || seg[1] == 'T') && at(2)
	case 'G':
		return (seg[1] == 'S' || seg[1] == 'E') && at(2)
	case 'I':
		return len(seg) >= 3 && (seg[1] == 'S' && seg[2] == 'A' || seg[1] == 'E' && seg[2] == 'A') && at(3) ||
			seg[1] == 'S' // a wrapped "IS\nA" is left to the general path
	case 'T':
		return len(seg) >= 3 && seg[1] == 'A' && seg[2] == '1' && at(3)
	}
	return false
}

func (r *Reader) endSet(trailer bool) Kind {
	s := r.set
	if trailer {
		seg := r.seg
		s.Complete = true
		// The elements are read as bytes: strings only for a message.
		if n := bytes.Trim(seg.Elem(1), " "); !numEqualBytes(n, s.SegmentCount) {
			r.setErr(seg, ErrSESegmentCount, fmt.Sprintf("SE01=%s, counted %d", quoteCtl(string(n)), s.SegmentCount))
		}
		if c := bytes.Trim(seg.Elem(2), " "); string(c) != s.ControlNumber {
			r.setErr(seg, ErrSEControlNumber, fmt.Sprintf("SE02=%s, ST02=%s", quoteCtl(string(c)), quoteCtl(s.ControlNumber)))
		}
		r.paddingWarning(seg, WarnSetPadding, 1, 2)
	} else {
		if len(s.Errors) < maxErrors {
			s.Errors = append(s.Errors, &ParseError{Offset: r.endOffset(), Segment: r.endIndex(),
				Position: s.SegmentCount + 1, Cause: ErrSEMissing})
		}
		r.nestErr(2)
	}
	if !r.opts.NoContentHash {
		r.hs.sum(&s.ContentHash)
		s.Normal = r.hs.normal
	}
	if r.opts.KeepSegments {
		// Segments are valid until the next Next: one slice serves every set.
		s.segs = r.segs
	}
	r.ended = KindSet
	return KindSet
}

// endOffset and endIndex locate a missing trailer: at the segment that
// showed it missing, or at the end of the input.
func (r *Reader) endOffset() int64 {
	if r.eof {
		return r.off
	}
	return r.seg.Offset
}

func (r *Reader) endIndex() int {
	if r.eof {
		return r.segIndex + 1
	}
	return r.seg.Index
}
