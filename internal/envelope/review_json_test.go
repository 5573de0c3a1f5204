package envelope

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestReviewJSONStringsMatchEncodingJSONOnRandomBytes: both string encoders
// (and UnescapeHTML of the HTML one) write what encoding/json writes, with
// and without HTML escaping, on random byte strings: invalid UTF-8, control
// characters, U+2028/9, backslashes before "u003c".
func TestReviewJSONStringsMatchEncodingJSONOnRandomBytes(t *testing.T) {
	alphabet := []string{"a", "<", ">", "&", "\\", "\"", "u003c", "\x00", "\x1f", "\x7f", "\u2028", "\u2029",
		"\xff", "\xe2\x80", "\xed\xa0\x80", "é", "\U0001F600", "\t", "\n", "\r", "\b", "\f", "/"}
	r := rand.New(rand.NewPCG(1, 4))
	for i := 0; i < 200000; i++ {
		var b []byte
		for n := r.IntN(8); n > 0; n-- {
			b = append(b, alphabet[r.IntN(len(alphabet))]...)
		}
		s := string(b)
		want, _ := json.Marshal(s)
		if got := AppendJSONStringHTML(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: HTML %s, want %s", s, got, want)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		want = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := UnescapeHTML(AppendJSONStringHTML([]byte("x"), s), 1); !bytes.Equal(got[1:], want) {
			t.Fatalf("%q: unescaped %s, want %s", s, got[1:], want)
		}
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: plain %s, want %s", s, got, want)
		}
	}
}
