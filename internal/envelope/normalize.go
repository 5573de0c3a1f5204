package envelope

// The normalised form of a segment is what the content hash covers. It is
// the same for every re-send of the same content, whatever its delimiters,
// line endings or padding, and differs when any element differs:
//   - delimiters become the canonical * ^ : with ~ ending each segment;
//   - a data byte equal to a canonical delimiter, or '\', is escaped with '\'
//     (it may be data where the file used other delimiters);
//   - trailing spaces of every element and component are dropped;
//   - trailing empty elements, repetitions and components are dropped;
//   - CR and LF, never X12 data, are dropped.

const escape = '\\'

// Byte classes for isNormalized, for a segment in the canonical delimiters.
const (
	clsData uint8 = iota
	clsSpace
	clsComp
	clsRep
	clsElem
	clsEscape
)

var normClass = func() (t [256]uint8) {
	t[' '] = clsSpace
	t[':'] = clsComp
	t['^'] = clsRep
	t['*'] = clsElem
	t[escape] = clsEscape
	t['~'] = clsEscape  // never in a segment read with '~' as terminator
	t['\r'] = clsEscape // line breaks are never data: the reader strips them
	t['\n'] = clsEscape
	return t
}()

// isNormalized reports whether raw, a segment in the canonical delimiters, is
// already in normalised form, so it can be hashed as it is. It must agree
// with appendNormalized; FuzzNormalize checks that it does.
func isNormalized(raw []byte) bool {
	prev := clsData
	for _, c := range raw {
		cls := normClass[c]
		switch cls {
		case clsEscape:
			return false
		case clsElem:
			if prev == clsSpace || prev == clsComp || prev == clsRep {
				return false
			}
		case clsRep:
			if prev == clsSpace || prev == clsComp {
				return false
			}
		case clsComp:
			if prev == clsSpace {
				return false
			}
		}
		prev = cls
	}
	return prev == clsData
}

// appendNormalized appends the normalised form of raw, a segment using d,
// without its terminator.
func appendNormalized(dst, raw []byte, d Delimiters) []byte {
	start := len(dst)
	// dataEnd is the end of the last data byte that is not a space; the
	// *Start values are where the current element, repetition and component
	// began in dst. At each delimiter, what follows dataEnd in the finished
	// level (spaces, empty components or repetitions) is dropped.
	dataEnd, elemStart, repStart, compStart := start, start, start, start
	for _, c := range raw {
		switch {
		case c == d.Element:
			dst = append(dst[:max(dataEnd, elemStart)], '*')
			elemStart, repStart, compStart = len(dst), len(dst), len(dst)
		case d.Repetition != 0 && c == d.Repetition:
			dst = append(dst[:max(dataEnd, repStart)], '^')
			repStart, compStart = len(dst), len(dst)
		case c == d.Component:
			dst = append(dst[:max(dataEnd, compStart)], ':')
			compStart = len(dst)
		case c == ' ':
			dst = append(dst, c)
		case c == '\r' || c == '\n':
			// Never data: line breaks of a wrapped file.
		case c == '*' || c == ':' || c == '^' || c == '~' || c == escape:
			dst = append(dst, escape, c)
			dataEnd = len(dst)
		default:
			dst = append(dst, c)
			dataEnd = len(dst)
		}
	}
	return dst[:dataEnd]
}
