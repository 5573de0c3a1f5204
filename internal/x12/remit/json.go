package remit

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
func money(dst []byte, m x12.Money) []byte      { return m.AppendJSON(dst) }

// AppendJSON appends the payment's JSON encoding to dst.
func (p *Payment) AppendJSON(dst []byte) []byte {
	o := len(dst)
	dst = append(dst, `{"transaction_handling":`...)
	dst = str(dst, p.TransactionHandling)
	dst = money(append(dst, `,"amount":`...), p.Amount)
	dst = str(append(dst, `,"credit_debit":`...), p.CreditDebit)
	dst = str(append(dst, `,"payment_method":`...), p.Method)
	if p.Format != "" {
		dst = str(key(dst, o, "payment_format"), p.Format)
	}
	if p.EffectiveDate != "" {
		dst = str(key(dst, o, "effective_date"), p.EffectiveDate)
	}
	dst = str(append(dst, `,"trace_type":`...), p.TraceType)
	dst = str(append(dst, `,"trace_number":`...), p.TraceNumber)
	dst = str(append(dst, `,"payer_id":`...), p.PayerID)
	if p.ProductionDate != "" {
		dst = str(key(dst, o, "production_date"), p.ProductionDate)
	}
	dst = p.Payer.AppendJSON(append(dst, `,"payer":`...))
	dst = p.Payee.AppendJSON(append(dst, `,"payee":`...))
	dst = append(dst, `,"claims":`...)
	dst = x12.AppendJSONArray(dst, p.Claims, (*Claim).AppendJSON)
	if len(p.ProviderAdjustments) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"provider_adjustments":`...), p.ProviderAdjustments, (*PLB).AppendJSON)
	}
	dst = p.Balance.AppendJSON(append(dst, `,"balance":`...))
	return append(dst, '}')
}

// AppendJSON appends the party's JSON encoding to dst.
func (p *Party) AppendJSON(dst []byte) []byte {
	o := len(dst)
	dst = append(dst, '{')
	if p.Name != "" {
		dst = str(key(dst, o, "name"), p.Name)
	}
	if p.IDQualifier != "" {
		dst = str(key(dst, o, "id_qualifier"), p.IDQualifier)
	}
	if p.ID != "" {
		dst = str(key(dst, o, "id"), p.ID)
	}
	if p.NPI != "" {
		dst = str(key(dst, o, "npi"), p.NPI)
	}
	if p.TaxID != "" {
		dst = str(key(dst, o, "tax_id"), p.TaxID)
	}
	if len(p.Refs) > 0 {
		dst = x12.AppendJSONArray(key(dst, o, "refs"), p.Refs, (*Ref).AppendJSON)
	}
	return append(dst, '}')
}

// AppendJSON appends the reference's JSON encoding to dst.
func (r *Ref) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"qualifier":`...), r.Qualifier)
	dst = str(append(dst, `,"value":`...), r.Value)
	return append(dst, '}')
}

// AppendJSON appends the person's JSON encoding to dst.
func (p *Person) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"entity":`...), p.Entity)
	if p.Last != "" {
		dst = str(append(dst, `,"last":`...), p.Last)
	}
	if p.First != "" {
		dst = str(append(dst, `,"first":`...), p.First)
	}
	if p.Middle != "" {
		dst = str(append(dst, `,"middle":`...), p.Middle)
	}
	if p.IDQualifier != "" {
		dst = str(append(dst, `,"id_qualifier":`...), p.IDQualifier)
	}
	if p.ID != "" {
		dst = str(append(dst, `,"id":`...), p.ID)
	}
	return append(dst, '}')
}

// AppendJSON appends the date's JSON encoding to dst.
func (d *DateOf) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"qualifier":`...), d.Qualifier)
	dst = str(append(dst, `,"date":`...), d.Date)
	return append(dst, '}')
}

// AppendJSON appends the adjustment's JSON encoding to dst.
func (a *Adjustment) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"group":`...), a.Group)
	dst = str(append(dst, `,"reason":`...), a.Reason)
	dst = money(append(dst, `,"amount":`...), a.Amount)
	if a.Quantity != "" {
		dst = str(append(dst, `,"quantity":`...), a.Quantity)
	}
	return append(dst, '}')
}

// AppendJSON appends the claim's JSON encoding to dst.
func (c *Claim) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"patient_control_number":`...), c.PatientControlNumber)
	dst = str(append(dst, `,"status":`...), c.Status)
	dst = money(append(dst, `,"charge":`...), c.Charge)
	dst = money(append(dst, `,"paid":`...), c.Paid)
	if c.PatientResponsibility != nil {
		dst = money(append(dst, `,"patient_responsibility":`...), *c.PatientResponsibility)
	}
	if c.FilingIndicator != "" {
		dst = str(append(dst, `,"filing_indicator":`...), c.FilingIndicator)
	}
	if c.PayerClaimControlNumber != "" {
		dst = str(append(dst, `,"payer_claim_control_number":`...), c.PayerClaimControlNumber)
	}
	if c.FacilityType != "" {
		dst = str(append(dst, `,"facility_type":`...), c.FacilityType)
	}
	if c.Frequency != "" {
		dst = str(append(dst, `,"frequency":`...), c.Frequency)
	}
	if len(c.People) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"people":`...), c.People, (*Person).AppendJSON)
	}
	if len(c.Dates) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"dates":`...), c.Dates, (*DateOf).AppendJSON)
	}
	if len(c.Refs) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"refs":`...), c.Refs, (*Ref).AppendJSON)
	}
	if len(c.Adjustments) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"adjustments":`...), c.Adjustments, (*Adjustment).AppendJSON)
	}
	if len(c.Lines) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"lines":`...), c.Lines, (*Line).AppendJSON)
	}
	return append(dst, '}')
}

// AppendJSON appends the service line's JSON encoding to dst.
func (l *Line) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"procedure_qualifier":`...), l.ProcedureQualifier)
	dst = str(append(dst, `,"procedure":`...), l.Procedure)
	if len(l.Modifiers) > 0 {
		dst = x12.AppendJSONStrings(append(dst, `,"modifiers":`...), l.Modifiers)
	}
	dst = money(append(dst, `,"charge":`...), l.Charge)
	dst = money(append(dst, `,"paid":`...), l.Paid)
	if l.RevenueCode != "" {
		dst = str(append(dst, `,"revenue_code":`...), l.RevenueCode)
	}
	if l.Units != "" {
		dst = str(append(dst, `,"units":`...), l.Units)
	}
	if len(l.Dates) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"dates":`...), l.Dates, (*DateOf).AppendJSON)
	}
	if len(l.Adjustments) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"adjustments":`...), l.Adjustments, (*Adjustment).AppendJSON)
	}
	if l.ControlNumber != "" {
		dst = str(append(dst, `,"line_control_number":`...), l.ControlNumber)
	}
	if len(l.Refs) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"refs":`...), l.Refs, (*Ref).AppendJSON)
	}
	return append(dst, '}')
}

// AppendJSON appends the provider adjustment's JSON encoding to dst.
func (p *PLB) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"provider_id":`...), p.ProviderID)
	dst = str(append(dst, `,"fiscal_period_date":`...), p.FiscalDate)
	dst = append(dst, `,"adjustments":`...)
	dst = x12.AppendJSONArray(dst, p.Adjustments, (*PLBAdjusted).AppendJSON)
	return append(dst, '}')
}

// AppendJSON appends the adjustment's JSON encoding to dst.
func (a *PLBAdjusted) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"reason":`...), a.Reason)
	if a.Reference != "" {
		dst = str(append(dst, `,"reference":`...), a.Reference)
	}
	dst = money(append(dst, `,"amount":`...), a.Amount)
	return append(dst, '}')
}

// AppendJSON appends the balance's JSON encoding to dst.
func (b *Balance) AppendJSON(dst []byte) []byte {
	dst = x12.AppendJSONBool(append(dst, `{"balanced":`...), b.Balanced)
	if len(b.Imbalances) > 0 {
		dst = x12.AppendJSONArray(append(dst, `,"imbalances":`...), b.Imbalances, (*Imbalance).AppendJSON)
	}
	return append(dst, '}')
}

// AppendJSON appends the imbalance's JSON encoding to dst.
func (im *Imbalance) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"level":`...), im.Level)
	if im.Claim != 0 {
		dst = strconv.AppendInt(append(dst, `,"claim":`...), int64(im.Claim), 10)
	}
	if im.Line != 0 {
		dst = strconv.AppendInt(append(dst, `,"line":`...), int64(im.Line), 10)
	}
	dst = money(append(dst, `,"expected":`...), im.Expected)
	dst = money(append(dst, `,"actual":`...), im.Actual)
	dst = money(append(dst, `,"difference":`...), im.Difference)
	return append(dst, '}')
}

// AppendJSON appends the summary's JSON encoding to dst.
func (s *Summary) AppendJSON(dst []byte) []byte {
	dst = str(append(dst, `{"kind":`...), s.Kind)
	dst = str(append(dst, `,"trace_number":`...), s.TraceNumber)
	dst = str(append(dst, `,"payer_id":`...), s.PayerID)
	dst = money(append(dst, `,"amount":`...), s.Amount)
	dst = x12.AppendJSONBool(append(dst, `,"balanced":`...), s.Balanced)
	dst = strconv.AppendInt(append(dst, `,"claims":`...), int64(s.Claims), 10)
	return append(dst, '}')
}
