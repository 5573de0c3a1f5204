package x12_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/ediwatch/ediwatch/internal/x12"
	"github.com/ediwatch/ediwatch/internal/x12/x12test"
)

func checkString(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := x12.AppendJSONString(nil, s); string(got) != string(want) {
		t.Fatalf("AppendJSONString(%q) = %s, encoding/json %s", s, got, want)
	}
}

// TestAppendJSONStringMatchesEncodingJSON: every byte alone and amid text,
// awkward pieces (HTML characters, controls, U+2028, invalid UTF-8) and
// random byte strings encode exactly as json.Marshal encodes them.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for b := 0; b < 256; b++ {
		checkString(t, string([]byte{byte(b)}))
		checkString(t, "ab"+string([]byte{byte(b)})+"cd")
	}
	r := rand.New(rand.NewPCG(14, 4))
	for range 20_000 {
		checkString(t, x12test.String(r))
		raw := make([]byte, r.IntN(12))
		for i := range raw {
			raw[i] = byte(r.IntN(256))
		}
		checkString(t, string(raw))
	}
	if got := x12.AppendJSONStrings(nil, nil); string(got) != "null" {
		t.Errorf("nil strings: %s", got)
	}
	for _, ss := range [][]string{{}, {"a"}, {"<", "\xff", ""}} {
		want, _ := json.Marshal(ss)
		if got := x12.AppendJSONStrings(nil, ss); string(got) != string(want) {
			t.Errorf("AppendJSONStrings(%q) = %s, want %s", ss, got, want)
		}
	}
}
