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

// parser reads one set. The strings of the payment are substrings of the
// set's text, and the lists of its claims and lines share one backing
// array per kind (sized by a first look at the segment identifiers), so a
// set costs a handful of allocations, not several per claim. A parser that
// reads set after set (Parser) keeps these arrays and the text buffer and
// only grows them.
type parser struct {
	segs     []envelope.Segment
	f        x12.Fields // the current segment
	i        int        // its index in segs
	problems []x12.Problem
	p        *Payment
	dates    x12.Strings
	reuse    bool   // the arrays are kept from set to set
	lean     bool   // read only what the Summary needs
	text     []byte // the set's segments back to back

	claims  []Claim
	plbs    []PLB
	people  []Person
	dateOfs []DateOf
	refs    []Ref
	adjs    []Adjustment
	lines   []Line
	mods    []string
	plbAdjs []PLBAdjusted
	moneys  []x12.Money
}

// Parse reads the segments of one 835 set, ST to SE. It returns the
// payment and the problems found; a set with problems is rejected and
// posts nothing, but the payment is returned as far as it could be read.
func Parse(segs []envelope.Segment) (*Payment, []x12.Problem) {
	ps := parser{p: &Payment{}}
	return ps.read(segs)
}

// Parser reads 835 sets one after another and reuses its memory from one
// set to the next: once warmed up by sets of a size, a set costs almost no
// allocation. What Parse returns (the payment, its lists and strings, the
// problems) belongs to the Parser and is valid only until the next call
// to Parse; use the package-level Parse for a payment to keep. The zero
// Parser is ready to use; a Parser is not safe for concurrent use.
type Parser struct {
	ps  parser
	pay Payment
}

// Parse reads the segments of one 835 set, ST to SE, as the package-level
// Parse does; the result is valid until the next call.
func (p *Parser) Parse(segs []envelope.Segment) (*Payment, []x12.Problem) {
	p.ps.lean = false
	return p.parse(segs)
}

// Summary returns the Summary of the payment Parse(segs) returns, read
// from the segments that decide it (the amounts, the trace, the claims)
// and skipping the rest: names, dates, references, procedure codes. Its
// strings are valid until the next call.
func (p *Parser) Summary(segs []envelope.Segment) Summary {
	p.ps.lean = true
	pay, _ := p.parse(segs)
	sum := pay.Summary()
	// A summary is read from segs in place: its strings are copied to the
	// text buffer, so that they stay as they are if segs change.
	n := len(sum.TraceNumber)
	b := append(append(p.ps.text[:0], sum.TraceNumber...), sum.PayerID...)
	sum.TraceNumber, sum.PayerID = x12.BytesString(b[:n]), x12.BytesString(b[n:])
	p.ps.text, p.pay = b, Payment{}
	return sum
}

func (p *Parser) parse(segs []envelope.Segment) (*Payment, []x12.Problem) {
	p.pay = Payment{}
	p.ps.p, p.ps.reuse = &p.pay, true
	pay, problems := p.ps.read(segs)
	p.ps.segs = nil
	if len(problems) == 0 {
		problems = nil // as a fresh parse returns them
	}
	return pay, problems
}

// read parses segs into ps.p.
func (ps *parser) read(segs []envelope.Segment) (*Payment, []x12.Problem) {
	ps.segs, ps.problems = segs, ps.problems[:0]
	ps.size()
	ps.parse()
	ps.p.Balance = balance(ps.p)
	return ps.p, ps.problems
}

// Packed identifiers of the segments size counts and a summary reads
// (x12.SegmentID).
const (
	idOfCLP = uint32('C')<<16 | uint32('L')<<8 | uint32('P')
	idOfSVC = uint32('S')<<16 | uint32('V')<<8 | uint32('C')
	idOfCAS = uint32('C')<<16 | uint32('A')<<8 | uint32('S')
	idOfNM1 = uint32('N')<<16 | uint32('M')<<8 | uint32('1')
	idOfDTM = uint32('D')<<16 | uint32('T')<<8 | uint32('M')
	idOfREF = uint32('R')<<16 | uint32('E')<<8 | uint32('F')
	idOfPLB = uint32('P')<<16 | uint32('L')<<8 | uint32('B')
	idOfBPR = uint32('B')<<16 | uint32('P')<<8 | uint32('R')
	idOfTRN = uint32('T')<<16 | uint32('R')<<8 | uint32('N')
)

// decidesSummary reports whether a segment of the identifier id (packed
// as by x12.SegmentID) changes a payment's Summary or the state the
// segments that do are read in: DTM, N1, NM1, REF, LX and the segments
// parse ignores do not (they only fill names, dates and references).
func decidesSummary(id uint32) bool {
	switch id {
	case idOfBPR, idOfTRN, idOfCLP, idOfCAS, idOfSVC, idOfPLB:
		return true
	}
	return false
}

// size counts the segments that become list elements and sizes the
// shared arrays for them.
func (ps *parser) size() {
	var claims, lines, adjs, people, dates, refs, plbs int
	for i := 1; i < len(ps.segs)-1; i++ {
		raw := ps.segs[i].Raw()
		es := ps.segs[i].Delimiters().Element
		switch x12.SegmentID(raw, es) {
		case idOfCLP:
			claims++
		case idOfSVC:
			lines++
		case idOfCAS:
			// At most one adjustment per reason, amount, quantity triple.
			adjs += (bytes.Count(raw, []byte{es}) + 1) / 3
		case idOfNM1:
			people++
		case idOfDTM:
			dates++
		case idOfREF:
			refs++
		case idOfPLB:
			plbs++
		}
	}
	ps.claims = x12.Arena(ps.claims, claims)
	if ps.claims == nil {
		ps.claims = []Claim{} // a payment without claims encodes "claims":[]
	}
	ps.p.Claims = ps.claims
	ps.lines = x12.Arena(ps.lines, lines)
	ps.mods = x12.Arena(ps.mods, lines/2)
	ps.adjs = x12.Arena(ps.adjs, adjs)
	ps.people = x12.Arena(ps.people, people)
	ps.dateOfs = x12.Arena(ps.dateOfs, dates)
	ps.refs = x12.Arena(ps.refs, refs)
	ps.moneys = x12.Arena(ps.moneys, claims)
	ps.dates.Block = 10 * (dates + 2)
	if ps.reuse {
		// Dates are carved from blocks shared by the sets that follow.
		ps.dates.Block = max(ps.dates.Block, 16<<10)
	}
	if plbs > 0 {
		ps.plbs = x12.Arena(ps.plbs, plbs)
		ps.p.ProviderAdjustments = ps.plbs
		ps.plbAdjs = x12.Arena(ps.plbAdjs, 2*plbs)
	}
}

// problem records p located at the current segment (p.Reject says whether
// the set cannot be processed because of it).
func (ps *parser) problem(p x12.Problem) {
	p.SegmentID, p.Position = ps.f.ID(), ps.i+1
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
func (ps *parser) money(elem int, loop string, required bool) (x12.Money, bool) {
	v := ps.f.Str(elem)
	if v == "" {
		if required {
			ps.problem(x12.Problem{Reject: true, Loop: loop, SegmentCode: "8", Element: elem, ElementRef: refAmount, ElementCode: "1", Message: "required amount missing"})
		}
		return x12.Money{}, false
	}
	m, err := x12.ParseMoney(v)
	if err != nil {
		ps.problem(x12.Problem{Reject: true, Loop: loop, SegmentCode: "8", Element: elem, ElementRef: refAmount, ElementCode: "6", Value: v, Message: "invalid amount: " + err.Error()})
		return x12.Money{}, false
	}
	return m, true
}

func (ps *parser) date(elem int, loop string) string {
	v := ps.f.Str(elem)
	d, ok := ps.dates.Date(v)
	if !ok {
		ps.problem(x12.Problem{Loop: loop, SegmentCode: "8", Element: elem, ElementRef: refDate, ElementCode: "8", Value: v, Message: "invalid date (CCYYMMDD)"})
	}
	return d
}

// required reads an element the implementation guide requires; reject says
// whether the set cannot be processed without it.
func (ps *parser) required(reject bool, elem int, loop, ref, what string) string {
	v := ps.f.Str(elem)
	if v == "" {
		ps.problem(x12.Problem{Reject: reject, Loop: loop, SegmentCode: "8", Element: elem, ElementRef: ref, ElementCode: "1", Message: "required " + what + " missing"})
	}
	return v
}

// adjustments reads a CAS segment's reason, amount, quantity triples into
// *to.
func (ps *parser) adjustments(loop string, to *[]Adjustment) {
	f := &ps.f
	group := f.Str(1)
	if group == "" {
		ps.problem(x12.Problem{Loop: loop, SegmentCode: "8", Element: 1, ElementRef: "1033", ElementCode: "1", Message: "required adjustment group code missing"})
	}
	for k := 2; k+1 <= 19; k += 3 {
		reason := f.Str(k)
		if reason == "" {
			if k == 2 {
				ps.problem(x12.Problem{Loop: loop, SegmentCode: "8", Element: 2, ElementRef: "1034", ElementCode: "1", Message: "required adjustment reason missing"})
			}
			break
		}
		amt, ok := ps.money(k+1, loop, true)
		if !ok {
			continue
		}
		*to = x12.AppendShared(&ps.adjs, *to, Adjustment{Group: group, Reason: reason, Amount: amt, Quantity: f.Str(k + 2)})
	}
}

func (ps *parser) person() Person {
	f := &ps.f
	return Person{Entity: f.Str(1), Last: f.Str(3), First: f.Str(4), Middle: f.Str(5), IDQualifier: f.Str(8), ID: f.Str(9)}
}

func (ps *parser) parse() {
	p := ps.p
	f := &ps.f
	var bpr, trn bool
	var party *Party
	var claim *Claim
	var line *Line
	var text string
	if !ps.lean {
		ps.text, text = x12.CopySegments(ps.text, ps.segs)
	}
	var d envelope.Delimiters
	next := 0
	if len(ps.segs) > 0 {
		d = ps.segs[0].Delimiters()
		next = len(ps.segs[0].Raw()) // ST
	}
	for i := 1; i < len(ps.segs)-1; i++ {
		ps.i = i
		raw := ps.segs[i].Raw()
		var seg string
		if ps.lean {
			if !decidesSummary(x12.SegmentID(raw, d.Element)) {
				continue
			}
			seg = x12.BytesString(raw) // read in place, see Summary
		} else {
			seg = text[next : next+len(raw)]
			next += len(raw)
		}
		f.Split(seg, d)
		switch f.ID() {
		case "BPR":
			bpr = true
			p.TransactionHandling = ps.required(false, 1, "", "305", "transaction handling code")
			if m, ok := ps.money(2, "", true); ok {
				p.Amount = m
			}
			p.CreditDebit = ps.required(true, 3, "", "478", "credit/debit flag")
			if p.CreditDebit != "" && p.CreditDebit != "C" && p.CreditDebit != "D" {
				ps.problem(x12.Problem{Reject: true, SegmentCode: "8", Element: 3, ElementRef: "478", ElementCode: "7", Value: p.CreditDebit, Message: "credit/debit flag must be C or D"})
			}
			p.Method = ps.required(false, 4, "", "591", "payment method")
			p.Format = f.Str(5)
			if v := f.Str(16); v != "" {
				p.EffectiveDate = ps.date(16, "")
			}
		case "TRN":
			if claim != nil {
				continue
			}
			trn = true
			p.TraceType = f.Str(1)
			p.TraceNumber = ps.required(true, 2, "", refTrace, "check or EFT trace number")
			p.PayerID = ps.required(true, 3, "", "509", "payer identifier")
		case "DTM":
			switch {
			case line != nil:
				line.Dates = x12.AppendShared(&ps.dateOfs, line.Dates, DateOf{Qualifier: f.Str(1), Date: ps.date(2, "2110")})
			case claim != nil:
				claim.Dates = x12.AppendShared(&ps.dateOfs, claim.Dates, DateOf{Qualifier: f.Str(1), Date: ps.date(2, "2100")})
			case f.Str(1) == "405":
				p.ProductionDate = ps.date(2, "")
			}
		case "N1":
			if claim != nil {
				continue
			}
			switch f.Str(1) {
			case "PR":
				party = &p.Payer
			case "PE":
				party = &p.Payee
			default:
				party = nil
				continue
			}
			party.Name = f.Str(2)
			party.IDQualifier, party.ID = f.Str(3), f.Str(4)
			if party.IDQualifier == "XX" {
				party.NPI = party.ID
			}
		case "REF":
			r := Ref{Qualifier: f.Str(1), Value: f.Str(2)}
			switch {
			case line != nil:
				if r.Qualifier == "6R" {
					line.ControlNumber = r.Value
				} else {
					line.Refs = x12.AppendShared(&ps.refs, line.Refs, r)
				}
			case claim != nil:
				claim.Refs = x12.AppendShared(&ps.refs, claim.Refs, r)
			case party != nil:
				if r.Qualifier == "TJ" {
					party.TaxID = r.Value
				}
				party.Refs = x12.AppendShared(&ps.refs, party.Refs, r)
			}
		case "LX":
			party = nil
		case "CLP":
			party, line = nil, nil
			p.Claims = append(p.Claims, Claim{})
			claim = &p.Claims[len(p.Claims)-1]
			claim.PatientControlNumber = ps.required(true, 1, "2100", refPCN, "patient control number")
			claim.Status = ps.required(false, 2, "2100", "1029", "claim status code")
			claim.Charge, _ = ps.money(3, "2100", true)
			claim.Paid, _ = ps.money(4, "2100", true)
			if m, ok := ps.money(5, "2100", false); ok {
				ps.moneys = append(ps.moneys, m)
				claim.PatientResponsibility = &ps.moneys[len(ps.moneys)-1]
			}
			claim.FilingIndicator = f.Str(6)
			claim.PayerClaimControlNumber = f.Str(7)
			claim.FacilityType = f.Str(8)
			claim.Frequency = f.Str(9)
		case "NM1":
			if claim != nil && line == nil {
				claim.People = x12.AppendShared(&ps.people, claim.People, ps.person())
			}
		case "CAS":
			switch {
			case line != nil:
				ps.adjustments("2110", &line.Adjustments)
			case claim != nil:
				ps.adjustments("2100", &claim.Adjustments)
			default:
				ps.problem(x12.Problem{Reject: true, SegmentCode: "2", Message: "CAS outside a claim"})
			}
		case "SVC":
			if claim == nil {
				ps.problem(x12.Problem{Reject: true, Loop: "2110", SegmentCode: "2", Message: "SVC outside a claim"})
				continue
			}
			claim.Lines = x12.AppendShared(&ps.lines, claim.Lines, Line{})
			line = &claim.Lines[len(claim.Lines)-1]
			if !ps.lean {
				ps.procedure(line)
			}
			line.Charge, _ = ps.money(2, "2110", true)
			line.Paid, _ = ps.money(3, "2110", true)
			line.RevenueCode = f.Str(4)
			line.Units = f.Str(5)
		case "PLB":
			claim, line, party = nil, nil, nil
			ps.plb()
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
func (ps *parser) procedure(line *Line) {
	f := &ps.f
	e := f.Elem(1)
	line.ProcedureQualifier, _ = f.Component(e, 1)
	line.Procedure, _ = f.Component(e, 2)
	switch {
	case line.ProcedureQualifier == "":
		ps.problem(x12.Problem{Loop: "2110", SegmentCode: "8", Element: 1, Component: 1, ElementRef: "235", ElementCode: "1", Message: "required procedure code qualifier missing (SVC01-1)"})
	case line.Procedure == "":
		ps.problem(x12.Problem{Loop: "2110", SegmentCode: "8", Element: 1, Component: 2, ElementRef: refProcedure, ElementCode: "1", Message: "required procedure code missing (SVC01-2)"})
	}
	for k := 3; k <= 6; k++ {
		if m, _ := f.Component(e, k); m != "" {
			line.Modifiers = x12.AppendShared(&ps.mods, line.Modifiers, m)
		}
	}
}

func (ps *parser) plb() {
	f := &ps.f
	plb := PLB{ProviderID: ps.required(false, 1, "", refIDCode, "provider identifier")}
	plb.FiscalDate = ps.date(2, "")
	for k := 3; k+1 <= 14; k += 2 {
		e := f.Elem(k)
		if x12.TrimSpaces(e) == "" {
			if k == 3 {
				ps.problem(x12.Problem{Reject: true, SegmentCode: "8", Element: 3, ElementRef: "426", ElementCode: "1", Message: "required adjustment reason missing"})
			}
			break
		}
		var adj PLBAdjusted
		adj.Reason, _ = f.Component(e, 1)
		adj.Reference, _ = f.Component(e, 2)
		amt, ok := ps.money(k+1, "", true)
		if !ok {
			continue
		}
		adj.Amount = amt
		plb.Adjustments = x12.AppendShared(&ps.plbAdjs, plb.Adjustments, adj)
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
