package remit

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
// exactly json.Marshal's bytes for every payment of the public corpus, for
// generated remittances, and for random payments with awkward strings,
// random money (past 64 bits too), nil, empty and filled slices.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	prefix := []byte("prefix")
	check := func(what string, p *Payment) {
		t.Helper()
		checkJSON(t, what, p, p.AppendJSON(nil))
		got := p.AppendJSON(bytes.Clone(prefix)) // appends, after what is there
		checkJSON(t, what+" (appended)", p, bytes.TrimPrefix(got, prefix))
		s := p.Summary()
		checkJSON(t, what+" summary", s, s.AppendJSON(nil))
		r := p.Redacted()
		checkJSON(t, what+" redacted", r, r.AppendJSON(nil))
	}
	n := 0
	for name, sets := range x12test.CorpusSets(t, "835") {
		for _, segs := range sets {
			p, _ := Parse(segs)
			check(name, p)
			n++
		}
	}
	if n < 16 {
		t.Fatalf("only %d corpus payments", n)
	}
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{Interchanges: 2, SetsPerGroup: 3, ClaimsPerSet: 5, LinesPerClaim: 3}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, segs := range x12test.Sets(t, buf.Bytes(), "835") {
		p, _ := Parse(segs)
		check("generated", p)
	}
	r := rand.New(rand.NewPCG(14, 835))
	for range 3000 {
		var p Payment
		x12test.Fill(r, &p)
		check("random", &p)
		var s Summary
		x12test.Fill(r, &s)
		checkJSON(t, "random summary", s, s.AppendJSON(nil))
	}
}
