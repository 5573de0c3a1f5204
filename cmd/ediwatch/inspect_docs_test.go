package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/x12"
	"github.com/ediwatch/ediwatch/internal/x12/claim"
	"github.com/ediwatch/ediwatch/internal/x12/remit"
	"github.com/ediwatch/ediwatch/internal/x12/x12test"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// encodeNoHTML is what inspect printed a document as before the
// hand-written encoders: encoding/json with HTML escaping off.
func encodeNoHTML(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// TestDocumentsAreEncodingJSONWithoutHTMLEscaping: every 835 and 837 set
// of the corpus prints, summary and --show-phi document, the bytes
// encoding/json printed with SetEscapeHTML(false), and so do random
// documents full of <, >, & and escapes.
func TestDocumentsAreEncodingJSONWithoutHTMLEscaping(t *testing.T) {
	check := func(what string, typ string, segs []envelope.Segment) {
		t.Helper()
		var ps process.Set
		switch typ {
		case "835":
			ps.Payment, _ = remit.Parse(segs)
		case "837":
			ps.Claims, _ = claim.Parse(segs)
		}
		for _, phi := range []bool{false, true} {
			var want []byte
			switch {
			case phi && ps.Payment != nil:
				want = encodeNoHTML(t, ps.Payment)
			case phi:
				want = encodeNoHTML(t, ps.Claims)
			default:
				want = encodeNoHTML(t, ps.Summary())
			}
			got, has, err := newDocEncoder(phi).appendDoc([]byte("prefix"), typ, segs)
			if err != nil || !has {
				t.Fatalf("%s: appendDoc: %v, %v", what, has, err)
			}
			if !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
				t.Fatalf("%s (show-phi %v):\n got %s\nwant %s", what, phi, got, want)
			}
		}
	}
	n := 0
	for _, typ := range []string{"835", "837"} {
		for name, sets := range x12test.CorpusSets(t, typ) {
			for _, segs := range sets {
				check(name, typ, segs)
				n++
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d corpus sets checked", n)
	}

	// Random documents: the encoders themselves on awkward strings.
	r := rand.New(rand.NewPCG(3, 5))
	lists := 0
	for range 2000 {
		var p remit.Payment
		x12test.Fill(r, &p)
		got := envelope.UnescapeHTML(p.AppendJSON(nil), 0)
		if want := encodeNoHTML(t, &p); !bytes.Equal(got, want) {
			t.Fatalf("payment:\n got %s\nwant %s", got, want)
		}
		var cs []claim.Claim
		x12test.Fill(r, &cs)
		if cs != nil {
			lists++
			got := envelope.UnescapeHTML(x12.AppendJSONArray(nil, cs, (*claim.Claim).AppendJSON), 0)
			if want := encodeNoHTML(t, cs); !bytes.Equal(got, want) {
				t.Fatalf("claims:\n got %s\nwant %s", got, want)
			}
		}
	}
	if lists < 100 {
		t.Fatalf("only %d random claim lists checked", lists)
	}
}

// TestOneDocEncoderPerWorkerPrintsWhatFreshParsesPrint: a docEncoder, whose
// parsers reuse their memory from set to set, prints for every 835 and 837
// set of the corpus and of generated files, read forwards and then
// backwards (big sets followed by small ones), the bytes a fresh parse of
// the set prints, summary and --show-phi document alike.
func TestOneDocEncoderPerWorkerPrintsWhatFreshParsesPrint(t *testing.T) {
	type set struct {
		typ  string
		segs []envelope.Segment
	}
	var sets []set
	for _, typ := range []string{"835", "837"} {
		for _, ss := range x12test.CorpusSets(t, typ) {
			for _, segs := range ss {
				sets = append(sets, set{typ, segs})
			}
		}
	}
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 2, ClaimsPerSet: 30, LinesPerClaim: 4}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, segs := range x12test.Sets(t, buf.Bytes(), "835") {
		sets = append(sets, set{"835", segs})
	}
	buf.Reset()
	if err := (x12gen.Claims{Claims: 25}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, segs := range x12test.Sets(t, buf.Bytes(), "837") {
		sets = append(sets, set{"837", segs})
	}
	backwards := slices.Clone(sets)
	slices.Reverse(backwards)
	sets = append(sets, backwards...)
	for _, phi := range []bool{false, true} {
		fresh := func(typ string, segs []envelope.Segment) []byte {
			var ps process.Set
			switch typ {
			case "835":
				ps.Payment, _ = remit.Parse(segs)
			case "837":
				ps.Claims, _ = claim.Parse(segs)
			}
			var b []byte
			switch {
			case phi && ps.Payment != nil:
				b = ps.Payment.AppendJSON(nil)
			case phi && ps.Claims != nil:
				b = x12.AppendJSONArray(nil, ps.Claims, (*claim.Claim).AppendJSON)
			default:
				b, _ = ps.AppendSummaryJSON(nil)
			}
			return envelope.UnescapeHTML(b, 0)
		}
		enc := newDocEncoder(phi)
		for i, s := range sets {
			got, has, err := enc.appendDoc(nil, s.typ, s.segs)
			if err != nil || !has {
				t.Fatalf("set %d: appendDoc: %v, %v", i, has, err)
			}
			if want := fresh(s.typ, s.segs); !bytes.Equal(got, want) {
				t.Fatalf("set %d (%s, show-phi %v):\n got %s\nwant %s", i, s.typ, phi, got, want)
			}
		}
	}
}
