package envelope

import (
	"bytes"
	"encoding/hex"
	"slices"
	"strconv"
	"unicode/utf8"
)

// This file writes a File's Report piecewise, while a Reader reads the file:
// the JSON of each interchange, group and set as it completes, and the
// file's errors in Report order as soon as that order is certain. Nothing in
// it grows with the number of transaction sets. The encodings are those
// encoding/json gives the Report types with HTML escaping off (as
// `ediwatch inspect --json` prints them); TestReportJSONAppendersMatch
// compares them.

// ReportErrors hands out the errors of a file, read by a Reader, in the
// order of Report.Errors and File.AllErrors: by offset, and at one offset in
// file, interchange, group, set order. It holds only the errors whose place
// is not certain yet: those at the offset where the Reader stands.
//
// Call Collect after every call to the Reader's Next that returned a Kind,
// and Finish once Next returned io.EOF. Not safe for concurrent use.
type ReportErrors struct {
	rd      *Reader
	pending []rankedErr

	fileSeen int
	ix       *Interchange
	ixIdx    int
	ixSeen   int
	g        *Group
	gIdx     int
	gSeen    int
	setIdx   int
}

// rankedErr is an error with its place in File.AllErrors before sorting:
// the file's errors, then per interchange its own, then per group its own
// followed by its sets'.
type rankedErr struct {
	e                     *ParseError
	tier, ix, g, set, pos int
}

func (a rankedErr) compare(b rankedErr) int {
	switch {
	case a.e.Offset != b.e.Offset:
		return cmpInt64(a.e.Offset, b.e.Offset)
	case a.tier != b.tier:
		return a.tier - b.tier
	case a.ix != b.ix:
		return a.ix - b.ix
	case a.g != b.g:
		return a.g - b.g
	case a.set != b.set:
		return a.set - b.set
	}
	return a.pos - b.pos
}

func cmpInt64(a, b int64) int {
	if a < b {
		return -1
	}
	return 1
}

// NewReportErrors returns a ReportErrors following rd.
func NewReportErrors(rd *Reader) *ReportErrors {
	return &ReportErrors{rd: rd, ixIdx: -1, gIdx: -1, setIdx: -1}
}

// Collect takes the errors the last call to Next found (k is what it
// returned) and calls emit with every error whose place is now certain, in
// order. It stops at, and returns, the first error emit returns.
func (re *ReportErrors) Collect(k Kind, emit func(*ParseError) error) error {
	re.gather(k)
	return re.flush(re.rd.errorFloor(), emit)
}

// Finish emits the errors still held, in order; call it once Next returned
// io.EOF.
func (re *ReportErrors) Finish(emit func(*ParseError) error) error {
	re.gather(0)
	return re.flush(-1, emit)
}

func (re *ReportErrors) gather(k Kind) {
	rd := re.rd
	for ; re.fileSeen < len(rd.fileErrs); re.fileSeen++ {
		re.add(rankedErr{e: rd.fileErrs[re.fileSeen], pos: re.fileSeen})
	}
	if ix := rd.ix; ix != nil {
		if ix != re.ix {
			re.ix, re.ixSeen = ix, 0
			re.ixIdx++
			re.g, re.gIdx = nil, -1
		}
		for ; re.ixSeen < len(ix.Errors); re.ixSeen++ {
			re.add(rankedErr{e: ix.Errors[re.ixSeen], tier: 1, ix: re.ixIdx, pos: re.ixSeen})
		}
	}
	if g := rd.g; g != nil {
		if g != re.g {
			re.g, re.gSeen = g, 0
			re.gIdx++
			re.setIdx = -1
		}
		for ; re.gSeen < len(g.Errors); re.gSeen++ {
			re.add(rankedErr{e: g.Errors[re.gSeen], tier: 1, ix: re.ixIdx, g: re.gIdx + 1, pos: re.gSeen})
		}
	}
	if k == KindSet {
		re.setIdx++
		for i, e := range rd.set.Errors {
			re.add(rankedErr{e: e, tier: 1, ix: re.ixIdx, g: re.gIdx + 1, set: re.setIdx + 1, pos: i})
		}
	}
}

func (re *ReportErrors) add(r rankedErr) {
	i, _ := slices.BinarySearchFunc(re.pending, r, rankedErr.compare)
	re.pending = slices.Insert(re.pending, i, r)
}

// flush emits the held errors before offset floor (all of them when floor
// is negative).
func (re *ReportErrors) flush(floor int64, emit func(*ParseError) error) error {
	n := 0
	for n < len(re.pending) && (floor < 0 || re.pending[n].e.Offset < floor) {
		if err := emit(re.pending[n].e); err != nil {
			return err
		}
		n++
	}
	if n > 0 {
		re.pending = append(re.pending[:0], re.pending[n:]...)
	}
	return nil
}

// errorFloor returns the lowest offset an error found by later calls to
// Next can have: every error is located at the segment being handled (the
// pending one, or one not read yet) or at the end of the input.
func (r *Reader) errorFloor() int64 {
	if r.pending {
		return r.seg.Offset
	}
	return r.off
}

// AppendJSONString appends s as a JSON string, escaped exactly as
// encoding/json escapes it with HTML escaping off (what `inspect --json`
// prints).
func AppendJSONString(dst []byte, s string) []byte { return appendJSONString(dst, s, &jsonSafe) }

// AppendJSONStringHTML appends s as a JSON string exactly as json.Marshal
// writes it: like AppendJSONString, and <, > and & escaped as \u003c,
// \u003e and \u0026 (the effect payloads, whose hashes are taken over
// those bytes).
func AppendJSONStringHTML(dst []byte, s string) []byte {
	return appendJSONString(dst, s, &jsonHTMLSafe)
}

// jsonSafe and jsonHTMLSafe tell the ASCII bytes a JSON string holds as
// they are, without and with HTML escaping.
var jsonSafe, jsonHTMLSafe = func() (plain, html [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		plain[b] = b != '"' && b != '\\'
		html[b] = plain[b] && b != '<' && b != '>' && b != '&'
	}
	return
}()

// appendJSONString is encoding/json's string encoding: control characters
// as \b, \f, \n, \r, \t or \u00XX, U+2028 and U+2029 escaped, each byte
// of invalid UTF-8 replaced by \ufffd, and the ASCII bytes safe says are
// not safe escaped.
func appendJSONString(dst []byte, s string, safe *[utf8.RuneSelf]bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf && safe[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// UnescapeHTML turns the HTML escapes json.Marshal writes (\u003c, \u003e,
// \u0026) in the JSON text dst[from:] back into <, > and &, in place, and
// returns the shortened dst: the bytes an encoder with HTML escaping off
// writes. Every backslash in JSON text begins an escape inside a string, so
// reading escapes from the start is exact.
func UnescapeHTML(dst []byte, from int) []byte {
	i := from + bytes.IndexByte(dst[from:], '\\')
	if i < from {
		return dst
	}
	w := i
	for i < len(dst) {
		c := dst[i]
		if c != '\\' || i+1 == len(dst) {
			dst[w] = c
			w, i = w+1, i+1
			continue
		}
		if r, ok := htmlEscaped(dst[i:]); ok {
			dst[w] = r
			w, i = w+1, i+6
			continue
		}
		dst[w], dst[w+1] = dst[i], dst[i+1] // any other escape, as it is
		w, i = w+2, i+2
	}
	return dst[:w]
}

// htmlEscaped reports the character b begins with the escape of, when it is
// one of json.Marshal's HTML escapes.
func htmlEscaped(b []byte) (byte, bool) {
	if len(b) < 6 || b[1] != 'u' || b[2] != '0' || b[3] != '0' {
		return 0, false
	}
	switch string(b[4:6]) {
	case "3c":
		return '<', true
	case "3e":
		return '>', true
	case "26":
		return '&', true
	}
	return 0, false
}

const hexDigits = "0123456789abcdef"

func appendKey(dst []byte, comma bool, key string) []byte {
	if comma {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

func appendStrField(dst []byte, comma bool, key, val string) []byte {
	return AppendJSONString(appendKey(dst, comma, key), val)
}

func appendBoolField(dst []byte, key string, v bool) []byte {
	return strconv.AppendBool(appendKey(dst, true, key), v)
}

func appendIntField(dst []byte, key string, v int64) []byte {
	return strconv.AppendInt(appendKey(dst, true, key), v, 10)
}

// AppendErrorJSON appends the JSON of e's ErrorReport.
func AppendErrorJSON(dst []byte, e *ParseError) []byte {
	dst = appendStrField(append(dst, '{'), false, "code", e.Cause.Code)
	dst = appendStrField(dst, true, "message", e.Error())
	dst = appendStrField(dst, true, "level", e.Cause.Level.String())
	if e.Cause.Ack != "" {
		dst = appendStrField(dst, true, "ack", e.Cause.Ack)
	}
	dst = appendIntField(dst, "offset", e.Offset)
	dst = appendIntField(dst, "segment", int64(e.Segment))
	if e.Position != 0 {
		dst = appendIntField(dst, "position", int64(e.Position))
	}
	return append(dst, '}')
}

// AppendErrorsJSON appends the JSON array of errs' ErrorReports.
func AppendErrorsJSON(dst []byte, errs []*ParseError) []byte {
	dst = append(dst, '[')
	for i, e := range errs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendErrorJSON(dst, e)
	}
	return append(dst, ']')
}

// AppendInterchangeHead opens ix's InterchangeReport object: the members
// known from its ISA, then `"groups":[`. AppendInterchangeTail closes it
// once the interchange ended.
func AppendInterchangeHead(dst []byte, ix *Interchange) []byte {
	dst = append(dst, '{')
	dst = appendStrField(dst, false, "sender", ix.Sender())
	dst = appendStrField(dst, true, "receiver", ix.Receiver())
	dst = appendStrField(dst, true, "control_number", ix.ControlNumber)
	dst = appendStrField(dst, true, "version", ix.Version)
	dst = appendStrField(dst, true, "usage", ix.Usage)
	dst = appendBoolField(dst, "ack_requested", ix.AckRequested)
	dst = appendStrField(dst, true, "delimiters", ix.Delimiters.String())
	dst = appendBoolField(dst, "canonical_isa", ix.Canonical)
	dst = appendStrField(dst, true, "key", ix.Key())
	return append(appendKey(dst, true, "groups"), '[')
}

// AppendInterchangeTail closes the groups array and the object
// AppendInterchangeHead opened, with the members known at the interchange's
// end: valid, errors, ta1_segments.
func AppendInterchangeTail(dst []byte, ix *Interchange) []byte {
	dst = append(dst, ']')
	dst = appendBoolField(dst, "valid", ix.Valid())
	dst = AppendErrorsJSON(appendKey(dst, true, "errors"), ix.Errors)
	dst = AppendWarningsField(dst, ix.Warnings)
	if len(ix.TA1) != 0 {
		dst = appendIntField(dst, "ta1_segments", int64(len(ix.TA1)))
	}
	return append(dst, '}')
}

// AppendGroupHead opens g's GroupReport object: the members known from
// its GS, then `"transaction_sets":[`.
func AppendGroupHead(dst []byte, g *Group) []byte {
	dst = append(dst, '{')
	dst = appendStrField(dst, false, "functional_id", g.FunctionalID)
	dst = appendStrField(dst, true, "control_number", g.ControlNumber)
	dst = appendStrField(dst, true, "version", g.Version)
	return append(appendKey(dst, true, "transaction_sets"), '[')
}

// AppendGroupTail closes the object AppendGroupHead opened, with the
// members known at the group's end: valid, errors.
func AppendGroupTail(dst []byte, g *Group) []byte {
	dst = append(dst, ']')
	dst = appendBoolField(dst, "valid", g.Valid())
	dst = AppendErrorsJSON(appendKey(dst, true, "errors"), g.Errors)
	dst = AppendWarningsField(dst, g.Warnings)
	return append(dst, '}')
}

// AppendSetOpen appends s's SetReport object without its document and
// without the closing brace: the caller appends `,"document":...` when
// there is one, then '}'.
func AppendSetOpen(dst []byte, s *Set) []byte {
	dst = append(dst, '{')
	dst = appendStrField(dst, false, "type", s.Type)
	dst = appendStrField(dst, true, "control_number", s.ControlNumber)
	dst = appendStrField(dst, true, "key", s.Key)
	dst = append(appendKey(dst, true, "content_hash"), '"')
	dst = hex.AppendEncode(dst, s.ContentHash[:])
	dst = append(dst, '"')
	dst = appendIntField(dst, "segments", int64(s.SegmentCount))
	dst = appendBoolField(dst, "valid", s.Valid())
	dst = AppendErrorsJSON(appendKey(dst, true, "errors"), s.Errors)
	return AppendWarningsField(dst, s.Warnings)
}

// AppendWarningsField appends `,"warnings":[...]` when ws is not empty, as
// the omitempty member of the report types.
func AppendWarningsField(dst []byte, ws []Warning) []byte {
	if len(ws) == 0 {
		return dst
	}
	dst = append(appendKey(dst, true, "warnings"), '[')
	for i, w := range ws {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendStrField(append(dst, '{'), false, "code", w.Code)
		dst = appendStrField(dst, true, "message", w.Message)
		dst = appendIntField(dst, "offset", w.Offset)
		dst = appendIntField(dst, "segment", int64(w.Segment))
		dst = append(dst, '}')
	}
	return append(dst, ']')
}
