package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/x12/claim"
	"github.com/ediwatch/ediwatch/internal/x12/remit"
	"github.com/ediwatch/ediwatch/internal/x12/x12test"
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
			got := envelope.UnescapeHTML(appendClaims(nil, cs), 0)
			if want := encodeNoHTML(t, cs); !bytes.Equal(got, want) {
				t.Fatalf("claims:\n got %s\nwant %s", got, want)
			}
		}
	}
	if lists < 100 {
		t.Fatalf("only %d random claim lists checked", lists)
	}
}
