package remit

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sets returns the 835 sets of an X12 text, segments kept.
func sets(t *testing.T, data []byte) [][]envelope.Segment {
	t.Helper()
	rd := envelope.NewReader(bytes.NewReader(data), envelope.Options{KeepSegments: true})
	var out [][]envelope.Segment
	for {
		k, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if k == envelope.KindSet && rd.Set().Type == "835" {
			var segs []envelope.Segment
			for _, s := range rd.Set().Segments() {
				segs = append(segs, s.Clone())
			}
			out = append(out, segs)
		}
	}
}

const fixture = "../../envelope/testdata/835_canonical.x12"

func canonical(t *testing.T) string {
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseOne(t *testing.T, text string) (*Payment, []x12.Problem) {
	t.Helper()
	ss := sets(t, []byte(text))
	if len(ss) != 1 {
		t.Fatalf("%d sets", len(ss))
	}
	return Parse(ss[0])
}

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update after checking):\n%s", path, got)
	}
}

func TestCanonicalPayment(t *testing.T) {
	p, probs := parseOne(t, canonical(t))
	if len(probs) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	if p.EffectKey() != "payment:1512345678:EFT0001" {
		t.Errorf("effect key %s", p.EffectKey())
	}
	if !p.Amount.Equal(x12.MustMoney("150")) || p.CreditDebit != "C" || p.Method != "ACH" || p.EffectiveDate != "2026-11-30" {
		t.Errorf("BPR: %+v", p)
	}
	if p.Payee.NPI != "1234567893" || p.Payer.Name != "ACME HEALTH PLAN" || p.ProductionDate != "2026-11-28" {
		t.Errorf("parties: %+v %+v", p.Payer, p.Payee)
	}
	c := p.Claims[0]
	if c.PatientControlNumber != "PCN001" || !c.Charge.Equal(x12.MustMoney("200")) || !c.Paid.Equal(x12.MustMoney("150")) ||
		c.People[0].Last != "DOE" || c.People[0].ID != "MEMBER001" || c.Frequency != "1" {
		t.Errorf("claim: %+v", c)
	}
	l := c.Lines[0]
	if l.Procedure != "99213" || l.ProcedureQualifier != "HC" || len(l.Modifiers) != 1 || l.Modifiers[0] != "25" ||
		l.ControlNumber != "LINE001" || len(l.Adjustments) != 2 || l.Adjustments[1].Group != "PR" || len(l.Dates) != 1 {
		t.Errorf("line: %+v", l)
	}
	if !p.Balance.Balanced {
		t.Errorf("balance: %+v", p.Balance)
	}
	golden(t, "835_canonical", p)
}

// TestCorpusPayments parses every 835 of the public corpus, compares each
// with its golden file, and reproduces the balancing verdicts of
// SOURCES.md.
func TestCorpusPayments(t *testing.T) {
	dir := testenv.Corpus(t)
	type verdict struct {
		balanced []bool // per 835 set in the file
		rejected bool   // some set has rejecting problems
		levels   []string
	}
	verdicts := map[string]verdict{
		"linuxforhealth-x12/cob-contractural-adjustment.835":                       {balanced: []bool{true}},
		"linuxforhealth-x12/managed-care.835":                                      {balanced: []bool{true}},
		"linuxforhealth-x12/medicare-part-a.835":                                   {balanced: []bool{true}},
		"linuxforhealth-x12/secondary-payment.835":                                 {balanced: []bool{true}},
		"moov-io-x12/example_5010_835-sample1.txt":                                 {balanced: []bool{false, true}, levels: []string{"claim"}},
		"moov-io-x12/example_5010_835-sample2.txt":                                 {balanced: []bool{false}, levels: []string{"claim"}},
		"nirmitee-clearinghouse-simulator/00455.20260830165653.000006.ERA.835.edi": {balanced: []bool{true}},
		"oopfactory-x12parser/Example1.txt":                                        {balanced: []bool{false}, rejected: true, levels: []string{"transaction"}},
		"oopfactory-x12parser/ExampleFromNth.txt":                                  {balanced: []bool{false, false, false}, levels: []string{"line", "claim", "transaction"}},
		"oopfactory-x12parser/835_WithMultipleInterchanges.txt":                    {balanced: []bool{false, false, false}},
		"pyx12/835_mult_loops.txt":                                                 {balanced: []bool{true}},
		"stupidedi/835-X221-case-1.edi":                                            {balanced: []bool{true}},
		"stupidedi/835-X221A1-dollars-and-data-sent-separate.edi":                  {balanced: []bool{true}},
		"stupidedi/835-X221A1-multiple-claims-single-check.edi":                    {balanced: []bool{true}},
		"tastypackets-x12-parser/multi-line-not-delimited.edi":                     {balanced: []bool{true}},
		"tastypackets-x12-parser/profee.edi":                                       {balanced: []bool{true}},
	}
	for name, v := range verdicts {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			ss := sets(t, data)
			if len(ss) != len(v.balanced) {
				t.Fatalf("%d 835 sets, want %d", len(ss), len(v.balanced))
			}
			rejected := false
			levels := map[string]bool{}
			var docs []*Payment
			for i, segs := range ss {
				p, probs := Parse(segs)
				docs = append(docs, p)
				if p.Balance.Balanced != v.balanced[i] {
					t.Errorf("set %d balanced=%v, want %v: %v", i+1, p.Balance.Balanced, v.balanced[i], p.Balance.Imbalances)
				}
				rejected = rejected || x12.Rejects(probs)
				for _, im := range p.Balance.Imbalances {
					levels[im.Level] = true
					if !im.Actual.Sub(im.Expected).Equal(im.Difference) {
						t.Errorf("difference %s is not actual - expected", im.Difference)
					}
				}
			}
			if rejected != v.rejected {
				t.Errorf("rejected=%v, want %v", rejected, v.rejected)
			}
			for _, l := range v.levels {
				if !levels[l] {
					t.Errorf("no imbalance at level %s; got %v", l, levels)
				}
			}
			golden(t, "corpus-"+strings.NewReplacer("/", "-", ".", "_").Replace(name), docs)
		})
	}
}

func TestBalancingLevels(t *testing.T) {
	base := canonical(t)
	for _, tc := range []struct {
		name, from, to string
		level          string
		diff           string
	}{
		{"line", "SVC*HC:99213:25*200.00*150.00", "SVC*HC:99213:25*200.00*149.00", "line", "-1.00"},
		{"claim", "CLP*PCN001*1*200.00*150.00", "CLP*PCN001*1*200.00*151.00", "claim", "1.00"},
		{"transaction", "BPR*I*150.00", "BPR*I*150.10", "transaction", "0.10"},
		{"plb", "SE*19*", "PLB*1234567893*20261231*WO:X1*-5.00~SE*20*", "transaction", "-5.00"},
		{"debit", "BPR*I*150.00*C", "BPR*I*150.00*D", "transaction", "-300.00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, probs := parseOne(t, strings.Replace(base, tc.from, tc.to, 1))
			if len(probs) != 0 {
				t.Fatalf("problems %v", probs)
			}
			if p.Balance.Balanced {
				t.Fatal("reported balanced")
			}
			found := false
			for _, im := range p.Balance.Imbalances {
				if im.Level == tc.level && im.Difference.Equal(x12.MustMoney(tc.diff)) {
					found = true
				}
			}
			if !found {
				t.Errorf("imbalances %v, want %s off by %s", p.Balance.Imbalances, tc.level, tc.diff)
			}
		})
	}
	// A PLB that explains the difference balances the transaction.
	p, _ := parseOne(t, strings.Replace(strings.Replace(base, "BPR*I*150.00", "BPR*I*151.27", 1),
		"SE*19*", "PLB*1234567893*20261231*WO:X1*-1.27~SE*20*", 1))
	if !p.Balance.Balanced || len(p.ProviderAdjustments) != 1 || p.ProviderAdjustments[0].Adjustments[0].Reference != "X1" {
		t.Errorf("PLB -1.27: %+v", p.Balance)
	}
}

// TestMoneyIsExact: amounts a float would get wrong sum exactly.
func TestMoneyIsExact(t *testing.T) {
	base := canonical(t)
	text := strings.NewReplacer(
		"BPR*I*150.00", "BPR*I*0.3",
		"CLP*PCN001*1*200.00*150.00", "CLP*PCN001*1*0.3*0.3",
		"SVC*HC:99213:25*200.00*150.00", "SVC*HC:99213:25*0.3*0.3",
		"CAS*CO*45*30.00", "CAS*CO*45*0.1*1*45*-0.1",
		"CAS*PR*2*20.00", "CAS*PR*2*0.2*1*2*-0.2",
	).Replace(base)
	p, probs := parseOne(t, text)
	if len(probs) != 0 || !p.Balance.Balanced {
		t.Fatalf("problems %v balance %+v", probs, p.Balance)
	}
	b, _ := json.Marshal(p.Amount)
	if string(b) != `"0.30"` {
		t.Errorf("amount JSON %s", b)
	}
	m := x12.MustMoney("1.005")
	if b, _ := json.Marshal(m); string(b) != `"1.005"` {
		t.Errorf("three decimals must survive: %s", b)
	}
}

func TestBadInputIsLocated(t *testing.T) {
	base := canonical(t)
	for _, tc := range []struct {
		name, from, to string
		seg            string
		pos, elem      int
		segCode, code  string
		reject         bool
	}{
		{"no BPR", "BPR*I*150.00*C*ACH*CCP*01*999999999*DA*123456*1512345678**01*999988880*DA*98765*20261130~", "", "BPR", 2, 0, "3", "", true},
		{"no TRN", "TRN*1*EFT0001*1512345678~", "", "TRN", 3, 0, "3", "", true},
		{"CLP without amounts", "CLP*PCN001*1*200.00*150.00*20.00*12", "CLP*PCN001*1***20.00*12", "CLP", 11, 3, "8", "1", true},
		{"non-numeric amount", "CAS*CO*45*30.00", "CAS*CO*45*30,00", "CAS", 16, 3, "8", "6", true},
		{"malformed composite", "SVC*HC:99213:25", "SVC*99213", "SVC", 14, 1, "8", "1", false},
		{"invalid date", "DTM*472*20261101", "DTM*472*20261301", "DTM", 15, 2, "8", "8", false},
		{"no trace number", "TRN*1*EFT0001*", "TRN*1**", "TRN", 3, 2, "8", "1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(base, tc.from, tc.to, 1)
			if text == base {
				t.Fatal("fixture edit did not apply")
			}
			_, probs := parseOne(t, text)
			if len(probs) == 0 {
				t.Fatal("no problem reported")
			}
			p := probs[0]
			if p.SegmentID != tc.seg || p.Position != tc.pos || p.Element != tc.elem || p.SegmentCode != tc.segCode ||
				p.ElementCode != tc.code || p.Reject != tc.reject {
				t.Errorf("problem %+v, want %s at %d element %d codes %s/%s reject=%v", p, tc.seg, tc.pos, tc.elem,
					tc.segCode, tc.code, tc.reject)
			}
			if strings.Contains(p.Error(), "DOE") || strings.Contains(p.Error(), "30,00") {
				t.Errorf("message quotes content: %s", p.Error())
			}
		})
	}
}

func TestSummaryAndRedactionHoldNoPHI(t *testing.T) {
	p, _ := parseOne(t, canonical(t))
	for _, v := range []any{p.Summary(), p.Redacted()} {
		b, _ := json.Marshal(v)
		for _, phi := range []string{"DOE", "JANE", "MEMBER001", "PCN001"} {
			if bytes.Contains(b, []byte(phi)) {
				t.Errorf("%T holds %s: %s", v, phi, b)
			}
		}
	}
	if s := p.Summary(); s.Claims != 1 || !s.Balanced || s.TraceNumber != "EFT0001" {
		t.Errorf("summary %+v", s)
	}
}
