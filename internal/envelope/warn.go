package envelope

import (
	"fmt"
	"strconv"
	"strings"
)

// Warning is one leniency the Reader applied: something it read as the
// sender meant it, where a strict receiver may reject the file (often with
// a TA1). A warning never makes a file invalid and never changes a key or a
// content hash. Like ParseError, it never quotes segment content.
type Warning struct {
	// Code is a stable, machine-readable name (the README lists them).
	Code string `json:"code"`
	// Message says what was read and what was tolerated.
	Message string `json:"message"`
	// Offset and Segment locate the first place the leniency applied.
	Offset  int64 `json:"offset"`
	Segment int   `json:"segment"`
}

// Warning codes, one per leniency of the Reader.
const (
	// File level.
	WarnUTF8BOM           = "utf8_bom"
	WarnLeadingWhitespace = "leading_whitespace"
	WarnPadding           = "padding"
	// Interchange level.
	WarnISAFieldWidth      = "isa_field_width"
	WarnISALineBreaks      = "isa_line_breaks"
	WarnIEA02Zeros         = "iea02_leading_zeros"
	WarnLineBreaks         = "line_breaks"
	WarnCRLFTerminator     = "crlf_terminator"
	WarnSegmentLineBreaks  = "segment_line_breaks"
	WarnEmptySegment       = "empty_segment"
	WarnFinalTerminator    = "final_terminator_missing"
	WarnLeadingPunctuation = "leading_punctuation"
	// Group level.
	WarnGE02Zeros    = "ge02_leading_zeros"
	WarnGroupPadding = "gs_ge_padding"
	// Set level.
	WarnSetPadding = "st_se_padding"
)

// isaWidths are the fixed widths of ISA01..ISA16.
var isaWidths = [isaElems + 1]int{0, 2, 10, 2, 10, 2, 15, 2, 15, 6, 4, 1, 5, 9, 1, 1, 1}

// isaWidthDetail names the ISA fields whose width is not the fixed one, or
// returns "".
func isaWidthDetail(h *isaHeader) string {
	var b strings.Builder
	n := 0
	for i := 1; i <= isaElems; i++ {
		if len(h.elems[i]) == isaWidths[i] {
			continue
		}
		if n > 0 {
			b.WriteString("; ")
		}
		n++
		fmt.Fprintf(&b, "ISA%02d is %s, not %d", i, characters(len(h.elems[i])), isaWidths[i])
	}
	return b.String()
}

// printableDelim shows a delimiter as an operator reads it: LF, CR, CR LF,
// TAB, a quoted printable byte, or its hex value.
func printableDelim(c byte, crlf bool) string {
	switch {
	case c == '\r' && crlf:
		return "CR LF"
	case c == '\r':
		return "CR"
	case c == '\n':
		return "LF"
	case c == '\t':
		return "TAB"
	case c > ' ' && c < 0x7F:
		return strconv.Quote(string(c))
	}
	return fmt.Sprintf("0x%02X", c)
}

// describeDelims names the delimiters read from an ISA, printable.
func describeDelims(d Delimiters, crlf bool) string {
	rep := "none"
	if d.Repetition != 0 {
		rep = printableDelim(d.Repetition, false)
	}
	return "delimiters read from the ISA: element " + printableDelim(d.Element, false) + ", repetition " + rep +
		", component " + printableDelim(d.Component, false) + ", segment terminator " + printableDelim(d.Segment, crlf)
}

// validDate reports whether v is a real YYMMDD date.
func validDate(v string) bool {
	if len(v) != 6 || !isDigits([]byte(v)) {
		return false
	}
	yy, mm, dd := atoi2(v[0:2]), atoi2(v[2:4]), atoi2(v[4:6])
	if mm < 1 || mm > 12 || dd < 1 {
		return false
	}
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[mm]
	if mm == 2 && yy%4 == 0 { // 2000..2099: every fourth year is a leap year
		days = 29
	}
	return dd <= days
}

// validTime reports whether v is a real HHMM time.
func validTime(v string) bool {
	return len(v) == 4 && isDigits([]byte(v)) && atoi2(v[0:2]) < 24 && atoi2(v[2:4]) < 60
}

func atoi2(s string) int { return int(s[0]-'0')*10 + int(s[1]-'0') }

// wsTrack counts the whitespace the Reader skipped between the segments of
// one interchange.
type wsTrack struct {
	first int64 // offset of the first skipped byte, when bytes > 0
	seg   int   // index of the segment before it
	bytes int64
}

// leniencies tracked per interchange and reported when it ends.
type ixLenient struct {
	ws       wsTrack
	wrapped  int // segments with line breaks inside
	wrapOff  int64
	wrapSeg  int
	empty    int
	emptyOff int64
	emptySeg int
	lead     byte // the stray byte before every segment identifier, or 0
	leadN    int  // segments it was stripped from
}

func (w *wsTrack) add(off int64, seg int, n int) {
	if w.bytes == 0 {
		w.first, w.seg = off, seg
	}
	w.bytes += int64(n)
}

// characters is "1 character" or "n characters".
func characters(n int) string { return plural(n, "character", "characters") }

// plural is n and the noun in its number: "1 byte", "2 bytes".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
