package claim

import (
	"strconv"

	"github.com/ediwatch/ediwatch/internal/x12"
)

// The AppendJSON methods write exactly the bytes json.Marshal writes for
// the same value (its json tags, omitempty, null for a nil slice, HTML
// escaping), without reflection: effect payloads and their hashes are
// built from them. TestAppendJSONMatchesEncodingJSON holds them to it.

func str(dst []byte, s string) []byte           { return x12.AppendJSONString(dst, s) }
func key(dst []byte, open int, k string) []byte { return x12.AppendJSONKey(dst, open, k) }

// AppendJSON appends the claim's JSON encoding to dst.
func (c *Claim) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"kind":`...), c.Kind)
	dst = str(append(dst, `,"claim_id":`...), c.ClaimID)
	dst = c.TotalCharge.AppendJSON(append(dst, `,"total_charge":`...))
	if c.FacilityCode != "" {
		dst = str(append(dst, `,"facility_code":`...), c.FacilityCode)
	}
	if c.FacilityQual != "" {
		dst = str(append(dst, `,"facility_code_qualifier":`...), c.FacilityQual)
	}
	if c.Frequency != "" {
		dst = str(append(dst, `,"frequency":`...), c.Frequency)
	}
	dst = c.BillingProvider.AppendJSON(append(dst, `,"billing_provider":`...))
	dst = c.Subscriber.AppendJSON(append(dst, `,"subscriber":`...))
	if c.Patient != nil {
		dst = c.Patient.AppendJSON(append(dst, `,"patient":`...))
	}
	dst = c.Payer.AppendJSON(append(dst, `,"payer":`...))
	if len(c.Diagnoses) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"diagnoses":`...), c.Diagnoses, (*Diagnosis).AppendJSON)
	}
	if len(c.Dates) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"dates":`...), c.Dates, (*DateOf).AppendJSON)
	}
	dst = append(dst, `,"lines":`...)
	dst = x12.AppendJSONArray(dst, c.Lines, (*Line).AppendJSON)
	return append(dst, '}')
}

// AppendJSON appends the provider's JSON encoding to dst.
func (p *Provider) AppendJSON(dst []byte) []byte {
	o := len(dst)
	dst = append(dst, '{')
	if p.Name != "" {
		dst = str(key(dst, o, "name"), p.Name)
	}
	if p.NPI != "" {
		dst = str(key(dst, o, "npi"), p.NPI)
	}
	if p.TaxID != "" {
		dst = str(key(dst, o, "tax_id"), p.TaxID)
	}
	return append(dst, '}')
}

// AppendJSON appends the member's JSON encoding to dst.
func (m *Member) AppendJSON(dst []byte) []byte {
	o := len(dst)
	dst = append(dst, '{')
	if m.Last != "" {
		dst = str(key(dst, o, "last"), m.Last)
	}
	if m.First != "" {
		dst = str(key(dst, o, "first"), m.First)
	}
	if m.MemberID != "" {
		dst = str(key(dst, o, "member_id"), m.MemberID)
	}
	if m.Relationship != "" {
		dst = str(key(dst, o, "relationship"), m.Relationship)
	}
	if m.Payer != "" {
		dst = str(key(dst, o, "responsibility"), m.Payer)
	}
	return append(dst, '}')
}

// AppendJSON appends the payer's JSON encoding to dst.
func (p *Payer) AppendJSON(dst []byte) []byte {
	o := len(dst)
	dst = append(dst, '{')
	if p.Name != "" {
		dst = str(key(dst, o, "name"), p.Name)
	}
	if p.ID != "" {
		dst = str(key(dst, o, "id"), p.ID)
	}
	return append(dst, '}')
}

// AppendJSON appends the diagnosis's JSON encoding to dst.
func (d *Diagnosis) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"qualifier":`...), d.Qualifier)
	dst = str(append(dst, `,"code":`...), d.Code)
	return append(dst, '}')
}

// AppendJSON appends the date's JSON encoding to dst.
func (d *DateOf) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"qualifier":`...), d.Qualifier)
	dst = str(append(dst, `,"date":`...), d.Date)
	return append(dst, '}')
}

// AppendJSON appends the line's JSON encoding to dst.
func (l *Line) AppendJSON(dst []byte) []byte {
	o := len(dst)
	dst = append(dst, '{')
	if l.Number != "" {
		dst = str(key(dst, o, "number"), l.Number)
	}
	if l.RevenueCode != "" {
		dst = str(key(dst, o, "revenue_code"), l.RevenueCode)
	}
	if l.ProcedureQualifier != "" {
		dst = str(key(dst, o, "procedure_qualifier"), l.ProcedureQualifier)
	}
	if l.Procedure != "" {
		dst = str(key(dst, o, "procedure"), l.Procedure)
	}
	if len(l.Modifiers) > 0 {
		dst = x12.AppendJSONStrings(key(dst, o, "modifiers"), l.Modifiers)
	}
	dst = l.Charge.AppendJSON(key(dst, o, "charge"))
	if l.UnitBasis != "" {
		dst = str(append(dst, `,"unit_basis":`...), l.UnitBasis)
	}
	if l.Units != "" {
		dst = str(append(dst, `,"units":`...), l.Units)
	}
	if l.Date != "" {
		dst = str(append(dst, `,"service_date":`...), l.Date)
	}
	return append(dst, '}')
}

// AppendJSON appends the summary's JSON encoding to dst.
func (s *Summary) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"kind":`...), s.Kind)
	dst = strconv.AppendInt(append(dst, `,"claims":`...), int64(s.Claims), 10)
	dst = s.TotalCharge.AppendJSON(append(dst, `,"total_charge":`...))
	return append(dst, '}')
}
