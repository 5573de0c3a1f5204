package claim

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/ediwatch/ediwatch/internal/x12/x12test"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

func checkJSON(t *testing.T, what string, v any, got []byte) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: AppendJSON differs from encoding/json\n got %s\nwant %s", what, got, want)
	}
}

// TestAppendJSONMatchesEncodingJSON: the hand-written encoders write
// exactly json.Marshal's bytes for every claim of the public corpus, for
// generated claims, and for random claims with awkward strings, random
// money (past 64 bits too), nil, empty and filled slices.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	check := func(what string, c *Claim) {
		t.Helper()
		checkJSON(t, what, c, c.AppendJSON(nil))
		got := c.AppendJSON([]byte("prefix"))
		checkJSON(t, what+" (appended)", c, bytes.TrimPrefix(got, []byte("prefix")))
	}
	n := 0
	for name, sets := range x12test.CorpusSets(t, "837") {
		for _, segs := range sets {
			claims, _ := Parse(segs)
			for i := range claims {
				check(name, &claims[i])
				n++
			}
			s := Summarize(claims)
			checkJSON(t, name+" summary", s, s.AppendJSON(nil))
		}
	}
	if n < 10 {
		t.Fatalf("only %d corpus claims", n)
	}
	var buf bytes.Buffer
	if err := (x12gen.Claims{Claims: 7}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, segs := range x12test.Sets(t, buf.Bytes(), "837") {
		claims, _ := Parse(segs)
		for i := range claims {
			check("generated", &claims[i])
		}
	}
	r := rand.New(rand.NewPCG(14, 837))
	for range 5000 {
		var c Claim
		x12test.Fill(r, &c)
		check("random", &c)
		var s Summary
		x12test.Fill(r, &s)
		checkJSON(t, "random summary", s, s.AppendJSON(nil))
	}
}
