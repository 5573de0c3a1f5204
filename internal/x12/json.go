package x12

import "github.com/ediwatch/ediwatch/internal/envelope"

// The document models encode their effect payloads with hand-written
// append-style encoders rather than encoding/json's reflection. These are
// their building blocks; the encoders must write exactly the bytes
// json.Marshal writes for the same structs (effect hashes are taken over
// them), which the models' tests prove.

// AppendJSONString appends s as a JSON string exactly as json.Marshal
// writes it: <, > and & escaped as \u003c, \u003e and \u0026, control
// characters as \b, \f, \n, \r, \t or \u00XX, U+2028 and U+2029 escaped,
// and each byte of invalid UTF-8 replaced by \ufffd.
func AppendJSONString(dst []byte, s string) []byte { return envelope.AppendJSONStringHTML(dst, s) }

// AppendJSONKey appends the member name key (plain ASCII, no escaping
// needed) and its colon to the object that starts at dst[open] (its '{'),
// with a comma before it unless it is the object's first member. It lets
// an encoder omit any member, the first included, without tracking state.
func AppendJSONKey(dst []byte, open int, key string) []byte {
	if len(dst) > open+1 {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

// AppendJSONBool appends true or false.
func AppendJSONBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// AppendJSONStrings appends a []string as json.Marshal writes it: null
// when nil.
func AppendJSONStrings(dst []byte, ss []string) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, s)
	}
	return append(dst, ']')
}

// AppendJSONArray appends xs as json.Marshal writes a slice: null when
// nil, else each element as enc writes it, in brackets.
func AppendJSONArray[T any](dst []byte, xs []T, enc func(*T, []byte) []byte) []byte {
	if xs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range xs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = enc(&xs[i], dst)
	}
	return append(dst, ']')
}
