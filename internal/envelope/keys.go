package envelope

import (
	"strconv"
	"strings"
)

// keyPart escapes an envelope value for use in a key: the value is trimmed
// of padding, and ':' (the key separator), '%' and bytes outside printable
// ASCII are percent-encoded, so no two different values share a key part.
func keyPart(v string) string {
	v = strings.Trim(v, " ")
	clean := true
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == ':' || c == '%' || c <= ' ' || c > '~' {
			clean = false
			break
		}
	}
	if clean {
		return v
	}
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ':' || c == '%' || c <= ' ' || c > '~' {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// keyVal returns the key part of an envelope element: trimmed, in its
// normalised form when it holds separators (so the key does not depend on
// the delimiters the file used), then escaped by keyPart.
func keyVal(v string, d Delimiters) string {
	v = strings.Trim(v, " ")
	if strings.IndexByte(v, d.Component) >= 0 || d.Repetition != 0 && strings.IndexByte(v, d.Repetition) >= 0 ||
		strings.ContainsAny(v, "*:^~\\") {
		v = string(appendNormalized(nil, []byte(v), d))
	}
	return keyPart(v)
}

// keyClean reports whether keyVal leaves v, trimmed of spaces, as it is:
// it holds no separator of d or of the canonical set, and nothing keyPart
// escapes.
func keyClean(v []byte, d Delimiters) bool {
	for _, c := range v {
		switch {
		case c <= ' ' || c >= '~' || c == ':' || c == '%' || c == '*' || c == '^' || c == escape,
			c == d.Component || d.Repetition != 0 && c == d.Repetition:
			return false
		}
	}
	return true
}

// numEqualBytes is numEqual for an element read as bytes, without making
// a string of it when it is plain digits.
func numEqualBytes(v []byte, n int) bool {
	if len(v) == 0 || len(v) > 9 {
		return numEqual(string(v), n)
	}
	got := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return numEqual(string(v), n)
		}
		got = got*10 + int(c-'0')
	}
	return got == n
}

// padISA13 returns an interchange control number in its fixed nine-digit
// form, so a header whose zero padding was stripped keys the same.
func padISA13(v string) string {
	if len(v) < 9 && isDigits([]byte(v)) {
		return strings.Repeat("0", 9-len(v)) + v
	}
	return v
}

// trimZeros returns a numeric group control number without leading zeros
// (GS06 is numeric, so 0001 and 1 are the same number).
func trimZeros(v string) string {
	if !isDigits([]byte(v)) {
		return v
	}
	t := strings.TrimLeft(v, "0")
	if t == "" {
		return "0"
	}
	return t
}

// numEqual reports whether the numeric element v equals n. A count is of
// type N0: digits alone (leading zeros allowed); a sign or a space is no
// count, though strconv.Atoi would read "+19" as 19.
func numEqual(v string, n int) bool {
	got, ok := count(v)
	return ok && got == n
}

// count reads the count v (type N0: digits alone).
func count(v string) (int, bool) {
	if !isDigits([]byte(v)) {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// quoteCtl quotes an envelope control value for an error message, bounded
// in length; envelope control values are never patient data.
func quoteCtl(v string) string {
	if len(v) > 20 {
		v = v[:20] + "..."
	}
	return strconv.Quote(v)
}

// KeyPart returns a value as the inbox keys write it (trimmed, escaped),
// for a value read from another document (a 999's AK202, a TA1's TA101)
// that names a key part.
func KeyPart(v string) string { return keyPart(v) }

// InterchangeNumberKeyPart returns an ISA13 (or TA101) as the keys write
// it: zero-padded to nine digits.
func InterchangeNumberKeyPart(v string) string { return keyPart(padISA13(strings.Trim(v, " "))) }

// GroupNumberKeyPart returns a GS06 (or AK102) as the keys write it:
// without leading zeros.
func GroupNumberKeyPart(v string) string { return keyPart(trimZeros(strings.Trim(v, " "))) }
