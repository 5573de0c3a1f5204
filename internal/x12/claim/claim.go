// Package claim turns an 837 (Health Care Claim, professional or
// institutional) transaction set into one canonical claim per CLM, and
// reports anything malformed as located problems for the 999.
package claim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

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

type parser struct {
	segs     []envelope.Segment
	problems []x12.Problem
	claims   []Claim
	kind     string
}

// Parse reads the segments of one 837 set, ST to SE, and returns its claims
// in order and the problems found. A set with rejecting problems posts
// nothing.
func Parse(segs []envelope.Segment) ([]Claim, []x12.Problem) {
	ps := &parser{segs: segs, kind: "professional"}
	if len(segs) > 0 && strings.Contains(segs[0].Str(3), "X223") {
		ps.kind = "institutional"
	}
	ps.parse()
	return ps.claims, ps.problems
}

func (ps *parser) problem(reject bool, i int, loop, segCode string, elem, comp int, ref, code, value, msg string, claim *Claim) {
	p := x12.Problem{SegmentID: ps.segs[i].ID(), Position: i + 1, Loop: loop, SegmentCode: segCode,
		Element: elem, Component: comp, ElementRef: ref, ElementCode: code, Value: value, Message: msg, Reject: reject}
	if claim != nil && claim.ClaimID != "" {
		p.ContextName, p.ContextValue = "CLM01", claim.ClaimID
	}
	ps.problems = append(ps.problems, p)
}

func (ps *parser) money(i, elem int, loop string, claim *Claim) x12.Money {
	v := ps.segs[i].Str(elem)
	if v == "" {
		ps.problem(true, i, loop, "8", elem, 0, "782", "1", "", "required amount missing", claim)
		return x12.Money{}
	}
	m, err := x12.ParseMoney(v)
	if err != nil {
		ps.problem(true, i, loop, "8", elem, 0, "782", "6", v, "invalid amount: "+err.Error(), claim)
	}
	return m
}

func comps(s envelope.Segment, elem int) []string {
	var out []string
	for _, c := range s.Components(s.Elem(elem)) {
		out = append(out, string(bytes.Trim(c, " ")))
	}
	return out
}

func at(c []string, i int) string {
	if i < len(c) {
		return c[i]
	}
	return ""
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
	for i := 1; i < len(ps.segs)-1; i++ {
		s := ps.segs[i]
		switch s.ID() {
		case "HL":
			level, claim, line = s.Str(3), nil, nil
			switch level {
			case "20":
				billing = Provider{}
				subscriber, patient, payer = Member{}, nil, Payer{}
			case "22":
				subscriber, patient, payer = Member{}, nil, Payer{}
			case "23":
				patient = &Member{}
			}
		case "SBR":
			subscriber.Payer, subscriber.Relationship = s.Str(1), s.Str(2)
		case "PAT":
			if patient != nil {
				patient.Relationship = s.Str(1)
			}
		case "NM1":
			entity = s.Str(1)
			if claim != nil {
				continue // 2310 providers of the claim
			}
			switch {
			case entity == "85" && level == "20":
				billing.Name = s.Str(3)
				if s.Str(8) == "XX" {
					billing.NPI = s.Str(9)
				}
			case entity == "IL":
				subscriber.Last, subscriber.First, subscriber.MemberID = s.Str(3), s.Str(4), s.Str(9)
			case entity == "PR":
				payer.Name, payer.ID = s.Str(3), s.Str(9)
			case entity == "QC" && patient != nil:
				patient.Last, patient.First, patient.MemberID = s.Str(3), s.Str(4), s.Str(9)
			}
		case "REF":
			if claim == nil && level == "20" && entity == "85" && (s.Str(1) == "EI" || s.Str(1) == "SY") {
				billing.TaxID = s.Str(2)
			}
		case "CLM":
			ps.claims = append(ps.claims, Claim{Kind: ps.kind, BillingProvider: billing, Subscriber: subscriber,
				Patient: patient, Payer: payer, Lines: []Line{}})
			claim, line = &ps.claims[len(ps.claims)-1], nil
			claim.ClaimID = s.Str(1)
			if claim.ClaimID == "" {
				ps.problem(true, i, "2300", "8", 1, 0, "1028", "1", "", "required claim identifier missing", nil)
			}
			claim.TotalCharge = ps.money(i, 2, "2300", claim)
			c5 := comps(s, 5)
			claim.FacilityCode, claim.FacilityQual, claim.Frequency = at(c5, 0), at(c5, 1), at(c5, 2)
			if claim.FacilityCode == "" {
				ps.problem(false, i, "2300", "8", 5, 1, "1331", "1", "", "required facility code missing (CLM05-1)", claim)
			}
			if level == "" {
				ps.problem(true, i, "2300", "2", 0, 0, "", "", "", "CLM outside a subscriber or patient level", claim)
			}
		case "HI":
			if claim == nil {
				continue
			}
			for _, rep := range s.Repeats(1) {
				ps.diagnoses(claim, s, rep)
			}
			for k := 2; k <= 12; k++ {
				if e := s.Elem(k); len(e) > 0 {
					ps.diagnoses(claim, s, e)
				}
			}
		case "DTP":
			d := DateOf{Qualifier: s.Str(1), Date: s.Str(3)}
			if s.Str(2) == "D8" {
				if v, ok := x12.Date(d.Date); ok {
					d.Date = v
				} else {
					ps.problem(false, i, "2300", "8", 3, 0, "1251", "8", d.Date, "invalid date (CCYYMMDD)", claim)
				}
			}
			switch {
			case line != nil:
				if d.Qualifier == "472" {
					line.Date = d.Date
				}
			case claim != nil:
				claim.Dates = append(claim.Dates, d)
			}
		case "LX":
			lineNo, line = s.Str(1), nil
		case "SV1", "SV2":
			if claim == nil {
				ps.problem(true, i, "2400", "2", 0, 0, "", "", "", s.ID()+" outside a claim", nil)
				continue
			}
			claim.Lines = append(claim.Lines, Line{Number: lineNo})
			line = &claim.Lines[len(claim.Lines)-1]
			proc, charge, basis, units := 1, 2, 3, 4
			if s.ID() == "SV2" {
				line.RevenueCode = s.Str(1)
				proc, charge, basis, units = 2, 3, 4, 5
			}
			c := comps(s, proc)
			line.ProcedureQualifier, line.Procedure = at(c, 0), at(c, 1)
			for k := 2; k < len(c) && k <= 5; k++ {
				if c[k] != "" {
					line.Modifiers = append(line.Modifiers, c[k])
				}
			}
			if s.ID() == "SV1" && (line.ProcedureQualifier == "" || line.Procedure == "") {
				ps.problem(false, i, "2400", "8", 1, 2, "234", "1", "", "malformed procedure composite (SV101)", claim)
			}
			line.Charge = ps.money(i, charge, "2400", claim)
			line.UnitBasis, line.Units = s.Str(basis), s.Str(units)
		}
	}
}

func (ps *parser) diagnoses(claim *Claim, s envelope.Segment, v []byte) {
	c := s.Components(v)
	if len(c) < 2 {
		return
	}
	claim.Diagnoses = append(claim.Diagnoses, Diagnosis{
		Qualifier: string(bytes.Trim(c[0], " ")), Code: string(bytes.Trim(c[1], " "))})
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
	return "claim:" + digest(sender, receiver, c.ClaimID, c.Frequency, contentHash)
}

// OrderingKey returns the ordering key of the claim.received effect:
// claimorder:{digest} over sender, receiver and CLM01, shared by a claim,
// its replacements and its void, so they are delivered in the order
// ingested.
func OrderingKey(sender, receiver string, c Claim) string {
	return "claimorder:" + digest(sender, receiver, c.ClaimID)
}

// digest is the SHA-256 (hex) of the parts, encoded unambiguously.
func digest(parts ...string) string {
	b, _ := json.Marshal(parts) // strings always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
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
