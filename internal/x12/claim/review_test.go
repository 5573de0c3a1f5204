package claim

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
)

// reviewRandomSet builds an 837 set of segments drawn at random, in any
// order, repeated or missing.
func reviewRandomSet(r *rand.Rand) []envelope.Segment {
	pool := []string{
		"HL*1**20*1", "HL*2*1*22*0", "HL*3*2*23*0", "HL*4*1*22*1", "HL*5", "HL*6*1*99",
		"SBR*P*18", "SBR*S", "PAT*19", "PAT",
		"NM1*85*2*CLINIC*****XX*1234567893", "NM1*IL*1*DOE*JOHN****MI*M1", "NM1*PR*2*PAYER*****PI*P1",
		"NM1*QC*1*DOE*JANE****MI*M2", "NM1*82*1*DR", "NM1", "REF*EI*123", "REF*SY*9", "REF",
		"CLM*PCN1*100.00***11:B:1*Y", "CLM*PCN2*-5***11:B:7", "CLM*<a&b>*1.5***:B:8", "CLM**x", "CLM", "CLM*P3*1***11",
		"HI*ABK:I10*ABF:E11^ABF:Z00", "HI*BK:1*BF", "HI", "HI*ABK", "HI*:X",
		"DTP*472*D8*20261101", "DTP*472*D8*2026", "DTP*434*RD8*20260101-20260102", "DTP",
		"LX*1", "LX*2", "LX",
		"SV1*HC:99213:25:26*100.00*UN*1", "SV1*HC*5", "SV1", "SV1*:*1", "SV2*0450*HC:1:A:B:C:D:E*10*UN*1", "SV2*X",
		"SV1*HC: 1 : A *1*UN*1", "CLM* Q *1*** 11 : B : 1 ",
	}
	d := envelope.Canonical
	head := "ST*837*0001*005010X222A1"
	if r.IntN(2) == 0 {
		head = "ST*837*0001*005010X223A2"
	}
	segs := []envelope.Segment{envelope.NewSegment([]byte(head), d)}
	for n := r.IntN(20); n > 0; n-- {
		segs = append(segs, envelope.NewSegment([]byte(pool[r.IntN(len(pool))]), d))
	}
	return append(segs, envelope.NewSegment([]byte("SE*1*0001"), d))
}

// TestReviewSummaryAgreesWithFullParseOnRandomSets: Parser.Summary, which
// reads the CLM segments alone, says what Summarize of the full parse says,
// and a reused Parser's claims encode as fresh ones, on random sets.
func TestReviewSummaryAgreesWithFullParseOnRandomSets(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 837))
	var p, q Parser
	for i := 0; i < 50000; i++ {
		segs := reviewRandomSet(r)
		want, _ := Parse(segs)
		got, has := p.Summary(segs)
		if got != Summarize(want) || has != (want != nil) {
			var b strings.Builder
			for _, s := range segs {
				b.Write(s.Raw())
				b.WriteByte('~')
			}
			t.Fatalf("%s\nsummary %+v %v\n   want %+v", b.String(), got, has, Summarize(want))
		}
		wantJSON, _ := json.Marshal(want)
		claims, _ := q.Parse(segs)
		gotJSON, _ := json.Marshal(claims)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("reused JSON\n got %s\nwant %s", gotJSON, wantJSON)
		}
		for k := range want {
			if got := want[k].AppendJSON(nil); !bytes.Equal(got, mustMarshal(t, want[k])) {
				t.Fatalf("AppendJSON\n got %s\nwant %s", got, mustMarshal(t, want[k]))
			}
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
