// Package claim turns an 837 (Health Care Claim, professional or
// institutional) transaction set into one canonical claim per CLM, and
// reports anything malformed as located problems for the 999.
package claim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// Claim is the canonical form of one CLM loop (2300) with the parties of
// the hierarchy above it.
type Claim struct {
	// Kind is "professional" (SV1 lines, 005010X222) or "institutional"
	// (SV2 lines, 005010X223).
	Kind            string      `json:"kind"`
	ClaimID         string      `json:"claim_id"`     // CLM01, the patient control number
	TotalCharge     x12.Money   `json:"total_charge"` // CLM02
	FacilityCode    string      `json:"facility_code,omitempty"`
	FacilityQual    string      `json:"facility_code_qualifier,omitempty"`
	Frequency       string      `json:"frequency,omitempty"`
	BillingProvider Provider    `json:"billing_provider"`
	Subscriber      Member      `json:"subscriber"`
	Patient         *Member     `json:"patient,omitempty"` // when not the subscriber
	Payer           Payer       `json:"payer"`
	Diagnoses       []Diagnosis `json:"diagnoses,omitempty"`
	Dates           []DateOf    `json:"dates,omitempty"`
	Lines           []Line      `json:"lines"`
}

// Provider is the billing provider (2010AA).
type Provider struct {
	Name  string `json:"name,omitempty"`
	NPI   string `json:"npi,omitempty"`
	TaxID string `json:"tax_id,omitempty"` // REF*EI or REF*SY
}

// Member is a subscriber (2010BA) or patient (2010CA).
type Member struct {
	Last         string `json:"last,omitempty"`
	First        string `json:"first,omitempty"`
	MemberID     string `json:"member_id,omitempty"`
	Relationship string `json:"relationship,omitempty"`   // SBR02 or PAT01
	Payer        string `json:"responsibility,omitempty"` // SBR01: P, S, T
}

// Payer is the payer (2010BB).
type Payer struct {
	Name string `json:"name,omitempty"`
	ID   string `json:"id,omitempty"`
}

// Diagnosis is one HI code with its qualifier (ABK principal, ABF other...).
type Diagnosis struct {
	Qualifier string `json:"qualifier"`
	Code      string `json:"code"`
}

// DateOf is a DTM: qualifier and date or period.
type DateOf struct {
	Qualifier string `json:"qualifier"`
	Date      string `json:"date"`
}

// Line is a service line (2400): SV1 or SV2.
type Line struct {
	Number             string    `json:"number,omitempty"` // LX01
	RevenueCode        string    `json:"revenue_code,omitempty"`
	ProcedureQualifier string    `json:"procedure_qualifier,omitempty"`
	Procedure          string    `json:"procedure,omitempty"`
	Modifiers          []string  `json:"modifiers,omitempty"`
	Charge             x12.Money `json:"charge"`
	UnitBasis          string    `json:"unit_basis,omitempty"`
	Units              string    `json:"units,omitempty"`
	Date               string    `json:"service_date,omitempty"`
}

// parser reads one set. The strings of the claims are substrings of the
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
	claims   []Claim
	kind     string
	dates    x12.Strings
	reuse    bool   // the arrays are kept from set to set
	lean     bool   // read only what the Summary needs
	text     []byte // the set's segments back to back

	lines     []Line
	mods      []string
	diagnoses []Diagnosis
	dateOfs   []DateOf
	members   []Member // patients (2010CA)
}

// Parse reads the segments of one 837 set, ST to SE, and returns its claims
// in order and the problems found. A set with rejecting problems posts
// nothing.
func Parse(segs []envelope.Segment) ([]Claim, []x12.Problem) {
	var ps parser
	return ps.read(segs)
}

// Parser reads 837 sets one after another and reuses its memory from one
// set to the next: once warmed up by sets of a size, a set costs almost no
// allocation. What Parse returns (the claims, their lists and strings, the
// problems) belongs to the Parser and is valid only until the next call
// to Parse; use the package-level Parse for claims to keep. The zero
// Parser is ready to use; a Parser is not safe for concurrent use.
type Parser struct {
	ps parser
}

// Parse reads the segments of one 837 set, ST to SE, as the package-level
// Parse does; the result is valid until the next call.
func (p *Parser) Parse(segs []envelope.Segment) ([]Claim, []x12.Problem) {
	p.ps.lean = false
	return p.parse(segs)
}

// Summary returns Summarize of the claims Parse(segs) returns, and
// whether there are any (a set of no claim shows no document), read from
// the CLM segments alone.
func (p *Parser) Summary(segs []envelope.Segment) (Summary, bool) {
	p.ps.lean = true
	claims, _ := p.parse(segs)
	return Summarize(claims), claims != nil // a Summary holds no text of segs
}

func (p *Parser) parse(segs []envelope.Segment) ([]Claim, []x12.Problem) {
	p.ps.reuse = true
	claims, problems := p.ps.read(segs)
	p.ps.segs = nil
	if len(claims) == 0 {
		claims = nil // as a fresh parse returns them
	}
	if len(problems) == 0 {
		problems = nil
	}
	return claims, problems
}

// read parses segs.
func (ps *parser) read(segs []envelope.Segment) ([]Claim, []x12.Problem) {
	ps.segs, ps.problems, ps.kind = segs, ps.problems[:0], "professional"
	if len(segs) > 0 && bytes.Contains(segs[0].Elem(3), []byte("X223")) {
		ps.kind = "institutional"
	}
	ps.size()
	ps.parse()
	return ps.claims, ps.problems
}

// Packed identifiers of the segments size counts (x12.SegmentID).
const (
	idOfCLM = uint32('C')<<16 | uint32('L')<<8 | uint32('M')
	idOfSV1 = uint32('S')<<16 | uint32('V')<<8 | uint32('1')
	idOfSV2 = uint32('S')<<16 | uint32('V')<<8 | uint32('2')
	idOfHI  = uint32('H')<<8 | uint32('I')
	idOfDTP = uint32('D')<<16 | uint32('T')<<8 | uint32('P')
	idOfHL  = uint32('H')<<8 | uint32('L')
)

// size counts the segments that become list elements and sizes the
// shared arrays for them.
func (ps *parser) size() {
	var claims, lines, diagnoses, dates, patients int
	for i := 1; i < len(ps.segs)-1; i++ {
		raw := ps.segs[i].Raw()
		es := ps.segs[i].Delimiters().Element
		switch x12.SegmentID(raw, es) {
		case idOfCLM:
			claims++
		case idOfSV1, idOfSV2:
			lines++
		case idOfHI:
			diagnoses += bytes.Count(raw, []byte{es}) // one per element, short of repetitions
		case idOfDTP:
			dates++
		case idOfHL:
			patients++ // at most one per level
		}
	}
	switch {
	case claims > 0:
		ps.claims = x12.Arena(ps.claims, claims)
	case ps.reuse:
		ps.claims = ps.claims[:0]
	}
	ps.lines = x12.Arena(ps.lines, lines)
	ps.mods = x12.Arena(ps.mods, lines/2)
	ps.diagnoses = x12.Arena(ps.diagnoses, diagnoses)
	ps.dateOfs = x12.Arena(ps.dateOfs, dates)
	ps.members = x12.Arena(ps.members, patients)
	ps.dates.Block = 10 * dates
	if ps.reuse {
		// Dates are carved from blocks shared by the sets that follow.
		ps.dates.Block = max(ps.dates.Block, 16<<10)
	}
}

func (ps *parser) problem(reject bool, loop, segCode string, elem, comp int, ref, code, value, msg string, claim *Claim) {
	p := x12.Problem{SegmentID: ps.f.ID(), Position: ps.i + 1, Loop: loop, SegmentCode: segCode,
		Element: elem, Component: comp, ElementRef: ref, ElementCode: code, Value: value, Message: msg, Reject: reject}
	if claim != nil && claim.ClaimID != "" {
		p.ContextName, p.ContextValue = "CLM01", claim.ClaimID
	}
	ps.problems = append(ps.problems, p)
}

func (ps *parser) money(elem int, loop string, claim *Claim) x12.Money {
	v := ps.f.Str(elem)
	if v == "" {
		ps.problem(true, loop, "8", elem, 0, "782", "1", "", "required amount missing", claim)
		return x12.Money{}
	}
	m, err := x12.ParseMoney(v)
	if err != nil {
		ps.problem(true, loop, "8", elem, 0, "782", "6", v, "invalid amount: "+err.Error(), claim)
	}
	return m
}

func (ps *parser) parse() {
	var (
		billing    Provider
		subscriber Member
		patient    *Member
		payer      Payer
		level      string // HL03 of the current hierarchical level
		entity     string // NM101 of the current 2010 loop
		claim      *Claim
		line       *Line
		lineNo     string
	)
	f := &ps.f
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
			if x12.SegmentID(raw, d.Element) != idOfCLM {
				continue // a claim's charge and count are on its CLM
			}
			seg = x12.BytesString(raw) // read in place: a Summary keeps no text
		} else {
			seg = text[next : next+len(raw)]
			next += len(raw)
		}
		f.Split(seg, d)
		switch id := f.ID(); id {
		case "HL":
			level, claim, line = f.Str(3), nil, nil
			switch level {
			case "20":
				billing = Provider{}
				subscriber, patient, payer = Member{}, nil, Payer{}
			case "22":
				subscriber, patient, payer = Member{}, nil, Payer{}
			case "23":
				ps.members = append(ps.members, Member{})
				patient = &ps.members[len(ps.members)-1]
			}
		case "SBR":
			subscriber.Payer, subscriber.Relationship = f.Str(1), f.Str(2)
		case "PAT":
			if patient != nil {
				patient.Relationship = f.Str(1)
			}
		case "NM1":
			entity = f.Str(1)
			if claim != nil {
				continue // 2310 providers of the claim
			}
			switch {
			case entity == "85" && level == "20":
				billing.Name = f.Str(3)
				if f.Str(8) == "XX" {
					billing.NPI = f.Str(9)
				}
			case entity == "IL":
				subscriber.Last, subscriber.First, subscriber.MemberID = f.Str(3), f.Str(4), f.Str(9)
			case entity == "PR":
				payer.Name, payer.ID = f.Str(3), f.Str(9)
			case entity == "QC" && patient != nil:
				patient.Last, patient.First, patient.MemberID = f.Str(3), f.Str(4), f.Str(9)
			}
		case "REF":
			if claim == nil && level == "20" && entity == "85" && (f.Str(1) == "EI" || f.Str(1) == "SY") {
				billing.TaxID = f.Str(2)
			}
		case "CLM":
			ps.claims = append(ps.claims, Claim{Kind: ps.kind, BillingProvider: billing, Subscriber: subscriber,
				Patient: patient, Payer: payer, Lines: []Line{}})
			claim, line = &ps.claims[len(ps.claims)-1], nil
			claim.ClaimID = f.Str(1)
			if claim.ClaimID == "" {
				ps.problem(true, "2300", "8", 1, 0, "1028", "1", "", "required claim identifier missing", nil)
			}
			claim.TotalCharge = ps.money(2, "2300", claim)
			c5 := f.Elem(5)
			claim.FacilityCode, _ = f.Component(c5, 1)
			claim.FacilityQual, _ = f.Component(c5, 2)
			claim.Frequency, _ = f.Component(c5, 3)
			if claim.FacilityCode == "" {
				ps.problem(false, "2300", "8", 5, 1, "1331", "1", "", "required facility code missing (CLM05-1)", claim)
			}
			if level == "" {
				ps.problem(true, "2300", "2", 0, 0, "", "", "", "CLM outside a subscriber or patient level", claim)
			}
		case "HI":
			if claim == nil {
				continue
			}
			f.Repetitions(f.Elem(1), func(rep string) { ps.diagnosis(claim, rep) })
			for k := 2; k <= 12; k++ {
				if e := f.Elem(k); len(e) > 0 {
					ps.diagnosis(claim, e)
				}
			}
		case "DTP":
			d := DateOf{Qualifier: f.Str(1), Date: f.Str(3)}
			if f.Str(2) == "D8" {
				if v, ok := ps.dates.Date(d.Date); ok {
					d.Date = v
				} else {
					ps.problem(false, "2300", "8", 3, 0, "1251", "8", d.Date, "invalid date (CCYYMMDD)", claim)
				}
			}
			switch {
			case line != nil:
				if d.Qualifier == "472" {
					line.Date = d.Date
				}
			case claim != nil:
				claim.Dates = x12.AppendShared(&ps.dateOfs, claim.Dates, d)
			}
		case "LX":
			lineNo, line = f.Str(1), nil
		case "SV1", "SV2":
			if claim == nil {
				ps.problem(true, "2400", "2", 0, 0, "", "", "", id+" outside a claim", nil)
				continue
			}
			claim.Lines = x12.AppendShared(&ps.lines, claim.Lines, Line{Number: lineNo})
			line = &claim.Lines[len(claim.Lines)-1]
			proc, charge, basis, units := 1, 2, 3, 4
			if id == "SV2" {
				line.RevenueCode = f.Str(1)
				proc, charge, basis, units = 2, 3, 4, 5
			}
			e := f.Elem(proc)
			line.ProcedureQualifier, _ = f.Component(e, 1)
			line.Procedure, _ = f.Component(e, 2)
			for k := 3; k <= 6; k++ {
				if m, _ := f.Component(e, k); m != "" {
					line.Modifiers = x12.AppendShared(&ps.mods, line.Modifiers, m)
				}
			}
			if id == "SV1" && (line.ProcedureQualifier == "" || line.Procedure == "") {
				ps.problem(false, "2400", "8", 1, 2, "234", "1", "", "malformed procedure composite (SV101)", claim)
			}
			line.Charge = ps.money(charge, "2400", claim)
			line.UnitBasis, line.Units = f.Str(basis), f.Str(units)
		}
	}
}

// diagnosis reads one HI code (qualifier, code) of the value v.
func (ps *parser) diagnosis(claim *Claim, v string) {
	q, _ := ps.f.Component(v, 1)
	code, ok := ps.f.Component(v, 2)
	if !ok {
		return
	}
	claim.Diagnoses = x12.AppendShared(&ps.diagnoses, claim.Diagnoses, Diagnosis{Qualifier: q, Code: code})
}

// EffectKey returns the business key of the claim.received effect:
// claim:{digest} over the claim's business identity — the interchange
// sender and receiver ("qualifier:id"), CLM01 and the frequency code
// CLM05-3 — and contentHash, the digest of the claim's content (never its
// envelope). The same claim re-batched under new control numbers has the
// same key (a business duplicate); a replacement (7) or void (8), a second
// replacement, and a corrected claim re-sent under its CLM01 after a
// rejection each have a key of their own and follow the original on its
// ordering key. The patient control number never appears in clear.
func EffectKey(sender, receiver string, c Claim, contentHash string) string {
	var buf [96]byte
	return string(AppendEffectKey(buf[:0], sender, receiver, &c, contentHash))
}

// AppendEffectKey appends EffectKey to dst.
func AppendEffectKey(dst []byte, sender, receiver string, c *Claim, contentHash string) []byte {
	return appendDigest(dst, "claim:", sender, receiver, c.ClaimID, c.Frequency, contentHash)
}

// OrderingKey returns the ordering key of the claim.received effect:
// claimorder:{digest} over sender, receiver and CLM01, shared by a claim,
// its replacements and its void, so they are delivered in the order
// ingested.
func OrderingKey(sender, receiver string, c Claim) string {
	var buf [96]byte
	return string(AppendOrderingKey(buf[:0], sender, receiver, &c))
}

// AppendOrderingKey appends OrderingKey to dst.
func AppendOrderingKey(dst []byte, sender, receiver string, c *Claim) []byte {
	return appendDigest(dst, "claimorder:", sender, receiver, c.ClaimID)
}

// appendDigest appends prefix and the SHA-256 (hex) of the parts, encoded
// unambiguously: as the JSON array of them json.Marshal writes.
func appendDigest(dst []byte, prefix string, parts ...string) []byte {
	var buf [512]byte
	b := append(buf[:0], '[')
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = x12.AppendJSONString(b, p)
	}
	sum := sha256.Sum256(append(b, ']'))
	return hex.AppendEncode(append(dst, prefix...), sum[:])
}

// Summary is what `inspect` shows of an 837 set: no patient data.
type Summary struct {
	Kind        string    `json:"kind"`
	Claims      int       `json:"claims"`
	TotalCharge x12.Money `json:"total_charge"`
}

// Summarize returns the summary of a set's claims.
func Summarize(claims []Claim) Summary {
	s := Summary{Kind: "claims", Claims: len(claims)}
	for _, c := range claims {
		s.TotalCharge = s.TotalCharge.Add(c.TotalCharge)
	}
	return s
}
