// Package remit turns an 835 (Health Care Claim Payment/Advice) transaction
// set into a canonical payment with exact money, checks that it balances at
// the service line, claim and transaction levels, and reports anything
// malformed as located problems for the 999.
package remit

import (
	"bytes"
	"fmt"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// Payment is the canonical form of one 835 transaction set.
type Payment struct {
	// TransactionHandling is BPR01: I remittance with payment, H
	// notification only, C payment accompanies remittance, ...
	TransactionHandling string    `json:"transaction_handling"`
	Amount              x12.Money `json:"amount"`         // BPR02
	CreditDebit         string    `json:"credit_debit"`   // BPR03: C or D
	Method              string    `json:"payment_method"` // BPR04: ACH, CHK, FWT, BOP, NON
	Format              string    `json:"payment_format,omitempty"`
	EffectiveDate       string    `json:"effective_date,omitempty"` // BPR16
	TraceType           string    `json:"trace_type"`               // TRN01
	TraceNumber         string    `json:"trace_number"`             // TRN02: check or EFT number
	PayerID             string    `json:"payer_id"`                 // TRN03
	ProductionDate      string    `json:"production_date,omitempty"`
	Payer               Party     `json:"payer"`
	Payee               Party     `json:"payee"`
	Claims              []Claim   `json:"claims"`
	ProviderAdjustments []PLB     `json:"provider_adjustments,omitempty"`
	Balance             Balance   `json:"balance"`
}

// Party is a payer or payee (N1 loop).
type Party struct {
	Name        string `json:"name,omitempty"`
	IDQualifier string `json:"id_qualifier,omitempty"` // N103
	ID          string `json:"id,omitempty"`           // N104
	NPI         string `json:"npi,omitempty"`          // N104 when N103 = XX
	TaxID       string `json:"tax_id,omitempty"`       // REF*TJ
	Refs        []Ref  `json:"refs,omitempty"`
}

// Ref is a REF segment: qualifier and value.
type Ref struct {
	Qualifier string `json:"qualifier"`
	Value     string `json:"value"`
}

// Person is a patient, insured or other individual (NM1).
type Person struct {
	Entity      string `json:"entity"` // NM101: QC patient, IL insured, ...
	Last        string `json:"last,omitempty"`
	First       string `json:"first,omitempty"`
	Middle      string `json:"middle,omitempty"`
	IDQualifier string `json:"id_qualifier,omitempty"`
	ID          string `json:"id,omitempty"`
}

// DateOf is a DTM segment: qualifier and date (YYYY-MM-DD).
type DateOf struct {
	Qualifier string `json:"qualifier"`
	Date      string `json:"date"`
}

// Adjustment is one reason/amount/quantity triple of a CAS segment.
type Adjustment struct {
	Group    string    `json:"group"` // CAS01: CO, PR, OA, PI, CR
	Reason   string    `json:"reason"`
	Amount   x12.Money `json:"amount"`
	Quantity string    `json:"quantity,omitempty"`
}

// Claim is a CLP loop (2100).
type Claim struct {
	PatientControlNumber    string       `json:"patient_control_number"` // CLP01
	Status                  string       `json:"status"`                 // CLP02
	Charge                  x12.Money    `json:"charge"`                 // CLP03
	Paid                    x12.Money    `json:"paid"`                   // CLP04
	PatientResponsibility   *x12.Money   `json:"patient_responsibility,omitempty"`
	FilingIndicator         string       `json:"filing_indicator,omitempty"`           // CLP06
	PayerClaimControlNumber string       `json:"payer_claim_control_number,omitempty"` // CLP07
	FacilityType            string       `json:"facility_type,omitempty"`              // CLP08
	Frequency               string       `json:"frequency,omitempty"`                  // CLP09
	People                  []Person     `json:"people,omitempty"`
	Dates                   []DateOf     `json:"dates,omitempty"`
	Refs                    []Ref        `json:"refs,omitempty"`
	Adjustments             []Adjustment `json:"adjustments,omitempty"`
	Lines                   []Line       `json:"lines,omitempty"`
}

// Line is an SVC loop (2110).
type Line struct {
	ProcedureQualifier string       `json:"procedure_qualifier"` // SVC01-1
	Procedure          string       `json:"procedure"`           // SVC01-2
	Modifiers          []string     `json:"modifiers,omitempty"` // SVC01-3..6
	Charge             x12.Money    `json:"charge"`              // SVC02
	Paid               x12.Money    `json:"paid"`                // SVC03
	RevenueCode        string       `json:"revenue_code,omitempty"`
	Units              string       `json:"units,omitempty"` // SVC05
	Dates              []DateOf     `json:"dates,omitempty"`
	Adjustments        []Adjustment `json:"adjustments,omitempty"`
	ControlNumber      string       `json:"line_control_number,omitempty"` // REF*6R
	Refs               []Ref        `json:"refs,omitempty"`
}

// PLB is a provider-level adjustment segment.
type PLB struct {
	ProviderID  string        `json:"provider_id"`
	FiscalDate  string        `json:"fiscal_period_date"`
	Adjustments []PLBAdjusted `json:"adjustments"`
}

// PLBAdjusted is one reason/amount pair of a PLB.
type PLBAdjusted struct {
	Reason    string    `json:"reason"`              // PLB03-1
	Reference string    `json:"reference,omitempty"` // PLB03-2
	Amount    x12.Money `json:"amount"`
}

// Balance reports whether the remittance balances, and where not.
type Balance struct {
	Balanced   bool        `json:"balanced"`
	Imbalances []Imbalance `json:"imbalances,omitempty"`
}

// Imbalance is one level that does not balance. Claim and Line are
// 1-based indexes (never patient identifiers), 0 when not applicable.
type Imbalance struct {
	Level      string    `json:"level"` // line, claim or transaction
	Claim      int       `json:"claim,omitempty"`
	Line       int       `json:"line,omitempty"`
	Expected   x12.Money `json:"expected"`
	Actual     x12.Money `json:"actual"`
	Difference x12.Money `json:"difference"`
}

// Data element reference numbers reported in IK402.
const (
	refAmount    = "782"
	refDate      = "373"
	refPCN       = "1028"
	refTrace     = "127"
	refIDCode    = "67"
	refProcedure = "234"
)

type parser struct {
	segs     []envelope.Segment
	problems []x12.Problem
	p        *Payment
}

// Parse reads the segments of one 835 set, ST to SE. It returns the
// payment and the problems found; a set with problems is rejected and
// posts nothing, but the payment is returned as far as it could be read.
func Parse(segs []envelope.Segment) (*Payment, []x12.Problem) {
	ps := &parser{segs: segs, p: &Payment{Claims: []Claim{}}}
	ps.parse()
	ps.p.Balance = balance(ps.p)
	return ps.p, ps.problems
}

// problem records p located at segment i (p.Reject says whether the set
// cannot be processed because of it).
func (ps *parser) problem(i int, p x12.Problem) {
	p.SegmentID, p.Position = ps.segs[i].ID(), i+1
	ps.problems = append(ps.problems, p)
}

// missing reports a required segment that is absent; it is located at the
// segment where it was expected.
func (ps *parser) missing(id string, at int, loop string) {
	ps.problems = append(ps.problems, x12.Problem{
		SegmentID: id, Position: at + 1, Loop: loop, SegmentCode: "3",
		Message: "required segment " + id + " missing", Reject: true,
	})
}

// money reads a required or optional amount element.
func (ps *parser) money(i, elem int, loop string, required bool) (x12.Money, bool) {
	v := ps.segs[i].Str(elem)
	if v == "" {
		if required {
			ps.problem(i, x12.Problem{Reject: true, Loop: loop, SegmentCode: "8", Element: elem, ElementRef: refAmount, ElementCode: "1", Message: "required amount missing"})
		}
		return x12.Money{}, false
	}
	m, err := x12.ParseMoney(v)
	if err != nil {
		ps.problem(i, x12.Problem{Reject: true, Loop: loop, SegmentCode: "8", Element: elem, ElementRef: refAmount, ElementCode: "6", Value: v, Message: "invalid amount: " + err.Error()})
		return x12.Money{}, false
	}
	return m, true
}

func (ps *parser) date(i, elem int, loop string) string {
	v := ps.segs[i].Str(elem)
	d, ok := x12.Date(v)
	if !ok {
		ps.problem(i, x12.Problem{Loop: loop, SegmentCode: "8", Element: elem, ElementRef: refDate, ElementCode: "8", Value: v, Message: "invalid date (CCYYMMDD)"})
	}
	return d
}

// required reads an element the implementation guide requires; reject says
// whether the set cannot be processed without it.
func (ps *parser) required(reject bool, i, elem int, loop, ref, what string) string {
	v := ps.segs[i].Str(elem)
	if v == "" {
		ps.problem(i, x12.Problem{Reject: reject, Loop: loop, SegmentCode: "8", Element: elem, ElementRef: ref, ElementCode: "1", Message: "required " + what + " missing"})
	}
	return v
}

func (ps *parser) adjustments(i int, loop string) []Adjustment {
	s := ps.segs[i]
	group := s.Str(1)
	if group == "" {
		ps.problem(i, x12.Problem{Loop: loop, SegmentCode: "8", Element: 1, ElementRef: "1033", ElementCode: "1", Message: "required adjustment group code missing"})
	}
	var out []Adjustment
	for k := 2; k+1 <= 19; k += 3 {
		reason := s.Str(k)
		if reason == "" {
			if k == 2 {
				ps.problem(i, x12.Problem{Loop: loop, SegmentCode: "8", Element: 2, ElementRef: "1034", ElementCode: "1", Message: "required adjustment reason missing"})
			}
			break
		}
		amt, ok := ps.money(i, k+1, loop, true)
		if !ok {
			continue
		}
		out = append(out, Adjustment{Group: group, Reason: reason, Amount: amt, Quantity: s.Str(k + 2)})
	}
	return out
}

func person(s envelope.Segment) Person {
	return Person{Entity: s.Str(1), Last: s.Str(3), First: s.Str(4), Middle: s.Str(5), IDQualifier: s.Str(8), ID: s.Str(9)}
}

func (ps *parser) parse() {
	p := ps.p
	var bpr, trn bool
	var party *Party
	var claim *Claim
	var line *Line
	headerEnd := len(ps.segs) - 1
	for i := 1; i < len(ps.segs)-1; i++ {
		s := ps.segs[i]
		switch s.ID() {
		case "BPR":
			bpr = true
			p.TransactionHandling = ps.required(false, i, 1, "", "305", "transaction handling code")
			if m, ok := ps.money(i, 2, "", true); ok {
				p.Amount = m
			}
			p.CreditDebit = ps.required(true, i, 3, "", "478", "credit/debit flag")
			if p.CreditDebit != "" && p.CreditDebit != "C" && p.CreditDebit != "D" {
				ps.problem(i, x12.Problem{Reject: true, SegmentCode: "8", Element: 3, ElementRef: "478", ElementCode: "7", Value: p.CreditDebit, Message: "credit/debit flag must be C or D"})
			}
			p.Method = ps.required(false, i, 4, "", "591", "payment method")
			p.Format = s.Str(5)
			if v := s.Str(16); v != "" {
				p.EffectiveDate = ps.date(i, 16, "")
			}
		case "TRN":
			if claim != nil {
				continue
			}
			trn = true
			p.TraceType = s.Str(1)
			p.TraceNumber = ps.required(true, i, 2, "", refTrace, "check or EFT trace number")
			p.PayerID = ps.required(true, i, 3, "", "509", "payer identifier")
		case "DTM":
			switch {
			case line != nil:
				line.Dates = append(line.Dates, DateOf{Qualifier: s.Str(1), Date: ps.date(i, 2, "2110")})
			case claim != nil:
				claim.Dates = append(claim.Dates, DateOf{Qualifier: s.Str(1), Date: ps.date(i, 2, "2100")})
			case s.Str(1) == "405":
				p.ProductionDate = ps.date(i, 2, "")
			}
		case "N1":
			if claim != nil {
				continue
			}
			switch s.Str(1) {
			case "PR":
				party = &p.Payer
			case "PE":
				party = &p.Payee
			default:
				party = nil
				continue
			}
			party.Name = s.Str(2)
			party.IDQualifier, party.ID = s.Str(3), s.Str(4)
			if party.IDQualifier == "XX" {
				party.NPI = party.ID
			}
		case "REF":
			r := Ref{Qualifier: s.Str(1), Value: s.Str(2)}
			switch {
			case line != nil:
				if r.Qualifier == "6R" {
					line.ControlNumber = r.Value
				} else {
					line.Refs = append(line.Refs, r)
				}
			case claim != nil:
				claim.Refs = append(claim.Refs, r)
			case party != nil:
				if r.Qualifier == "TJ" {
					party.TaxID = r.Value
				}
				party.Refs = append(party.Refs, r)
			}
		case "LX":
			party = nil
			if headerEnd == len(ps.segs)-1 {
				headerEnd = i
			}
		case "CLP":
			party, line = nil, nil
			if headerEnd == len(ps.segs)-1 {
				headerEnd = i
			}
			p.Claims = append(p.Claims, Claim{})
			claim = &p.Claims[len(p.Claims)-1]
			claim.PatientControlNumber = ps.required(true, i, 1, "2100", refPCN, "patient control number")
			claim.Status = ps.required(false, i, 2, "2100", "1029", "claim status code")
			claim.Charge, _ = ps.money(i, 3, "2100", true)
			claim.Paid, _ = ps.money(i, 4, "2100", true)
			if m, ok := ps.money(i, 5, "2100", false); ok {
				claim.PatientResponsibility = &m
			}
			claim.FilingIndicator = s.Str(6)
			claim.PayerClaimControlNumber = s.Str(7)
			claim.FacilityType = s.Str(8)
			claim.Frequency = s.Str(9)
		case "NM1":
			if claim != nil && line == nil {
				claim.People = append(claim.People, person(s))
			}
		case "CAS":
			switch {
			case line != nil:
				line.Adjustments = append(line.Adjustments, ps.adjustments(i, "2110")...)
			case claim != nil:
				claim.Adjustments = append(claim.Adjustments, ps.adjustments(i, "2100")...)
			default:
				ps.problem(i, x12.Problem{Reject: true, SegmentCode: "2", Message: "CAS outside a claim"})
			}
		case "SVC":
			if claim == nil {
				ps.problem(i, x12.Problem{Reject: true, Loop: "2110", SegmentCode: "2", Message: "SVC outside a claim"})
				continue
			}
			claim.Lines = append(claim.Lines, Line{})
			line = &claim.Lines[len(claim.Lines)-1]
			ps.procedure(i, line)
			line.Charge, _ = ps.money(i, 2, "2110", true)
			line.Paid, _ = ps.money(i, 3, "2110", true)
			line.RevenueCode = s.Str(4)
			line.Units = s.Str(5)
		case "PLB":
			claim, line, party = nil, nil, nil
			ps.plb(i)
		}
	}
	if !bpr {
		ps.missing("BPR", 1, "")
	}
	if !trn {
		ps.missing("TRN", 2, "")
	}
}

// procedure reads the SVC01 composite: qualifier, code, modifiers.
func (ps *parser) procedure(i int, line *Line) {
	s := ps.segs[i]
	comps := s.Components(s.Elem(1))
	get := func(k int) string {
		if k < len(comps) {
			return string(bytes.Trim(comps[k], " "))
		}
		return ""
	}
	line.ProcedureQualifier, line.Procedure = get(0), get(1)
	switch {
	case line.ProcedureQualifier == "":
		ps.problem(i, x12.Problem{Loop: "2110", SegmentCode: "8", Element: 1, Component: 1, ElementRef: "235", ElementCode: "1", Message: "required procedure code qualifier missing (SVC01-1)"})
	case line.Procedure == "":
		ps.problem(i, x12.Problem{Loop: "2110", SegmentCode: "8", Element: 1, Component: 2, ElementRef: refProcedure, ElementCode: "1", Message: "required procedure code missing (SVC01-2)"})
	}
	for k := 2; k <= 5; k++ {
		if m := get(k); m != "" {
			line.Modifiers = append(line.Modifiers, m)
		}
	}
}

func (ps *parser) plb(i int) {
	s := ps.segs[i]
	plb := PLB{ProviderID: ps.required(false, i, 1, "", refIDCode, "provider identifier")}
	plb.FiscalDate = ps.date(i, 2, "")
	for k := 3; k+1 <= 14; k += 2 {
		e := s.Elem(k)
		if len(bytes.Trim(e, " ")) == 0 {
			if k == 3 {
				ps.problem(i, x12.Problem{Reject: true, SegmentCode: "8", Element: 3, ElementRef: "426", ElementCode: "1", Message: "required adjustment reason missing"})
			}
			break
		}
		comps := s.Components(e)
		adj := PLBAdjusted{Reason: string(bytes.Trim(comps[0], " "))}
		if len(comps) > 1 {
			adj.Reference = string(bytes.Trim(comps[1], " "))
		}
		amt, ok := ps.money(i, k+1, "", true)
		if !ok {
			continue
		}
		adj.Amount = amt
		plb.Adjustments = append(plb.Adjustments, adj)
	}
	ps.p.ProviderAdjustments = append(ps.p.ProviderAdjustments, plb)
}

func sumAdj(adjs []Adjustment) x12.Money {
	var t x12.Money
	for _, a := range adjs {
		t = t.Add(a.Amount)
	}
	return t
}

// balance checks the three balancing rules of the 835:
//   - line: SVC03 = SVC02 - sum of the line's CAS amounts;
//   - claim: CLP04 = CLP03 - sum of the claim's and its lines' CAS amounts;
//   - transaction: BPR02 = sum of CLP04 - sum of PLB amounts (negated when
//     BPR03 is D, a debit).
//
// It reports each level that does not balance with the difference
// (actual - expected); it never corrects anything.
func balance(p *Payment) Balance {
	b := Balance{Balanced: true}
	add := func(im Imbalance) {
		b.Balanced = false
		b.Imbalances = append(b.Imbalances, im)
	}
	var paid x12.Money
	for ci, c := range p.Claims {
		adj := sumAdj(c.Adjustments)
		for li, l := range c.Lines {
			la := sumAdj(l.Adjustments)
			adj = adj.Add(la)
			if want := l.Charge.Sub(la); !want.Equal(l.Paid) {
				add(Imbalance{Level: "line", Claim: ci + 1, Line: li + 1, Expected: want, Actual: l.Paid, Difference: l.Paid.Sub(want)})
			}
		}
		if want := c.Charge.Sub(adj); !want.Equal(c.Paid) {
			add(Imbalance{Level: "claim", Claim: ci + 1, Expected: want, Actual: c.Paid, Difference: c.Paid.Sub(want)})
		}
		paid = paid.Add(c.Paid)
	}
	for _, plb := range p.ProviderAdjustments {
		for _, a := range plb.Adjustments {
			paid = paid.Sub(a.Amount)
		}
	}
	total := p.Amount
	if p.CreditDebit == "D" {
		total = total.Neg()
	}
	if !paid.Equal(total) {
		add(Imbalance{Level: "transaction", Expected: paid, Actual: total, Difference: total.Sub(paid)})
	}
	return b
}

// EffectKey returns the business key of the payment.posted effect:
// payment:{TRN03}:{TRN02}.
func (p *Payment) EffectKey() string { return "payment:" + p.PayerID + ":" + p.TraceNumber }

// Summary is what `inspect` shows of a payment: no patient data.
type Summary struct {
	Kind        string    `json:"kind"`
	TraceNumber string    `json:"trace_number"`
	PayerID     string    `json:"payer_id"`
	Amount      x12.Money `json:"amount"`
	Balanced    bool      `json:"balanced"`
	Claims      int       `json:"claims"`
}

// Summary returns the payment's summary.
func (p *Payment) Summary() Summary {
	return Summary{Kind: "payment", TraceNumber: p.TraceNumber, PayerID: p.PayerID, Amount: p.Amount,
		Balanced: p.Balance.Balanced, Claims: len(p.Claims)}
}

// Redacted returns a copy without patient data: names, member ids and
// patient control numbers are removed, amounts and codes kept.
func (p *Payment) Redacted() *Payment {
	q := *p
	q.Claims = make([]Claim, len(p.Claims))
	for i, c := range p.Claims {
		c.PatientControlNumber = ""
		c.People = nil
		q.Claims[i] = c
	}
	return &q
}

func (im Imbalance) String() string {
	where := im.Level
	if im.Claim > 0 {
		where += fmt.Sprintf(" (claim %d", im.Claim)
		if im.Line > 0 {
			where += fmt.Sprintf(", line %d", im.Line)
		}
		where += ")"
	}
	return fmt.Sprintf("%s: expected %s, got %s, difference %s", where, im.Expected, im.Actual, im.Difference)
}
