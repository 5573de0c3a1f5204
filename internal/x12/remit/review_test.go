package remit

import (
	"math/rand/v2"

	"bytes"
	"encoding/json"
	"github.com/ediwatch/ediwatch/internal/envelope"
	"strings"
	"testing"
)

// A payment with no CLP (a provider-level-adjustment-only 835) encoded
// "claims":[] before the fast parser (Parse started from Claims: []Claim{});
// the effect payload and its hash must not change.
func TestReviewPaymentWithoutClaimsEncodesEmptyClaimsArray(t *testing.T) {
	base := canonical(t)
	i, j := strings.Index(base, "LX*1~"), strings.Index(base, "SE*19*")
	text := base[:i] + "PLB*1234567893*20261231*WO:X1*-150.00~" + base[j:]
	p, _ := parseOne(t, text)
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(want, []byte(`"claims":[]`)) {
		t.Errorf("fresh Parse of a payment without claims: want \"claims\":[] as before, got %s", want)
	}
	if got := p.AppendJSON(nil); !bytes.Contains(got, []byte(`"claims":[]`)) {
		t.Errorf("AppendJSON: want \"claims\":[] as before, got %s", got)
	}
}

// randomBody builds an 835 set of segments drawn at random from shapes
// that move money, in any order, repeated or missing.
func reviewRandomSet(r *rand.Rand) []envelope.Segment {
	pool := []string{
		"BPR*I*150.00*C*ACH", "BPR*I*-150.00*D*CHK", "BPR*I**C", "BPR*I*12.5*X", "BPR",
		"TRN*1*EFT0001*1512345678", "TRN*1*EFT0002*999", "TRN", "TRN*1**",
		"CLP*PCN001*1*200.00*150.00*20.00*12", "CLP*PCN002*2*-50*-50", "CLP*X*1*abc*1", "CLP",
		"CLP*P*1*100*100**12", "CLP*Q*4*0*0",
		"SVC*HC:99213:25*200.00*150.00**1", "SVC*HC:1*-10*-10", "SVC", "SVC*HC:1*5", "SVC*:*1*1",
		"CAS*CO*45*30.00", "CAS*PR*2*20.00*1*3*0.005", "CAS*CO", "CAS**1*1", "CAS*OA*1*x*2*3*4",
		"PLB*1234567893*20261231*WO:X1*-5.00*L6:Y2*1.25", "PLB*1*2*FB*1*WO*2*WO*3*WO*4*WO*5*WO*6", "PLB", "PLB*1*20261301* *1",
		"DTM*405*20261128", "DTM*472*x", "N1*PR*ACME", "N1*PE*X*XX*1", "REF*6R*L1", "REF*TJ*1", "LX*1",
		"NM1*QC*1*DOE*JANE", "CLP ", "SVC*HC: 99213 : 25 ::: X :Y:Z*1 * 1 ", "CAS* CO * 45 * 30.00 * * 2 * 1",
		"PLB* 1 * 20261231 * WO : X1 : Z * -5.00 *:*1", "BPR* I * 1.0 * C ", "TRN* 1 * A * B ", "CLP* A * 1 * 1.00 * 1 * 0 ",
		"DTM*405*20261128*x", "N1*PR", "REF*TJ", "REF", "NM1", "DTM", "CAS*CO*1*99999999999999999*2*99999999999999999",
		"CLP*B*1*999999999999999999*-999999999999999999", "SVC*HC:1*0.000000000000000001*-1", " CLP*Z*1*1*1", "SVC *HC:1*1*1",
	}
	d := envelope.Canonical
	segs := []envelope.Segment{envelope.NewSegment([]byte("ST*835*0001"), d)}
	for n := r.IntN(14); n > 0; n-- {
		segs = append(segs, envelope.NewSegment([]byte(pool[r.IntN(len(pool))]), d))
	}
	return append(segs, envelope.NewSegment([]byte("SE*1*0001"), d))
}

// TestReviewSummaryAgreesWithFullParseOnRandomSets: Parser.Summary, which
// reads only some segments, says what the full parse's Summary says, and a
// reused Parser's payment encodes as a fresh one, on random segment orders.
func TestReviewSummaryAgreesWithFullParseOnRandomSets(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	var p, q Parser
	for i := 0; i < 50000; i++ {
		segs := reviewRandomSet(r)
		want, _ := Parse(segs)
		if got := p.Summary(segs); got != want.Summary() {
			var b strings.Builder
			for _, s := range segs {
				b.Write(s.Raw())
				b.WriteByte('~')
			}
			t.Fatalf("%s\nsummary %+v\n   want %+v", b.String(), got, want.Summary())
		}
		wantJSON, _ := json.Marshal(want)
		got, _ := q.Parse(segs)
		if gotJSON := got.AppendJSON(nil); !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("reused JSON\n got %s\nwant %s", gotJSON, wantJSON)
		}
		if gotJSON := want.AppendJSON(nil); !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("AppendJSON\n got %s\nwant %s", gotJSON, wantJSON)
		}
	}
}
