package answer

import (
	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// Implementation277CA is the ST03 (and GS08) of a 277CA claim
// acknowledgment.
const Implementation277CA = "005010X214"

// Levels of a claim status.
const (
	// LevelBatch: loop 2200B, the information receiver's whole batch.
	LevelBatch = "batch"
	// LevelProvider: loop 2200C, everything of one billing provider.
	LevelProvider = "provider"
	// LevelClaim: loop 2200D, one claim.
	LevelClaim = "claim"
)

// ClaimStatus is one status of a 277CA: a claim's (loop 2200D) or, at
// level batch or provider, a whole batch's (2200B) or provider's (2200C).
type ClaimStatus struct {
	Level string `json:"level"`
	// Verdict is accepted, rejected or unknown, from the statuses'
	// category codes (see Verdict).
	Verdict string `json:"verdict"`
	// PatientControlNumber is TRN02 of a claim (the 837's CLM01).
	PatientControlNumber string `json:"patient_control_number,omitempty"`
	// TraceNumber is TRN02 of a batch or provider status.
	TraceNumber string `json:"trace_number,omitempty"`
	// BatchTrace is the TRN02 of the information receiver's loop (2200B:
	// the answered 837's BHT03) that a provider or claim status belongs
	// to. It tells apart the statuses of two batches that otherwise read
	// alike (2200C TRN02 is the information source's to assign, often
	// "0"), and a re-sent 277CA keeps it.
	BatchTrace string `json:"batch_trace,omitempty"`
	// PayerClaimNumber is REF*1K; ClearinghouseTrace REF*D9; BillType
	// REF*BLT.
	PayerClaimNumber   string `json:"payer_claim_number,omitempty"`
	ClearinghouseTrace string `json:"clearinghouse_trace,omitempty"`
	BillType           string `json:"bill_type,omitempty"`
	// Source is the information source (loop 2100A NM1: payer or
	// clearinghouse): its qualifier:id and name.
	Source     string `json:"source,omitempty"`
	SourceName string `json:"source_name,omitempty"`
	// Provider is the billing provider's NM108:NM109 (loop 2100C), for
	// provider and claim statuses.
	Provider string `json:"provider,omitempty"`
	// ServiceFrom and ServiceTo are DTP*472 (YYYY-MM-DD).
	ServiceFrom string   `json:"service_from,omitempty"`
	ServiceTo   string   `json:"service_to,omitempty"`
	Statuses    []Status `json:"statuses"`
	// Lines are the service line statuses of a claim (loop 2220D).
	Lines []LineStatus `json:"lines,omitempty"`
	// AcceptedCount, RejectedCount, AcceptedAmount and RejectedAmount
	// are a batch's or provider's QTY*90/AA, QTY*AA/91 and AMT*YU/YY.
	AcceptedCount  string     `json:"accepted_count,omitempty"`
	RejectedCount  string     `json:"rejected_count,omitempty"`
	AcceptedAmount *x12.Money `json:"accepted_amount,omitempty"`
	RejectedAmount *x12.Money `json:"rejected_amount,omitempty"`
}

// Status is one STC segment.
type Status struct {
	StatusCode
	Date   string     `json:"date,omitempty"`   // STC02
	Action string     `json:"action,omitempty"` // STC03
	Amount *x12.Money `json:"amount,omitempty"` // STC04
	// Further are STC10 and STC11.
	Further []StatusCode `json:"further,omitempty"`
}

// StatusCode is a C043 health care claim status composite.
type StatusCode struct {
	Category string `json:"category"`            // -1 claim status category code
	Code     string `json:"code,omitempty"`      // -2 claim status code
	Entity   string `json:"entity,omitempty"`    // -3 entity identifier code
	CodeList string `json:"code_list,omitempty"` // -4 code list qualifier (NCPDP reject codes)
}

// LineStatus is a service line's status (loop 2220D).
type LineStatus struct {
	Procedure   string     `json:"procedure,omitempty"` // SVC01, components joined by ':'
	Charge      *x12.Money `json:"charge,omitempty"`    // SVC02
	Revenue     string     `json:"revenue,omitempty"`   // SVC04
	Units       string     `json:"units,omitempty"`     // SVC07
	LineControl string     `json:"line_control,omitempty"`
	ServiceFrom string     `json:"service_from,omitempty"`
	ServiceTo   string     `json:"service_to,omitempty"`
	Statuses    []Status   `json:"statuses"`
}

// acceptedCategories and rejectedCategories are the 277CA's claim status
// category codes (STC01-1) that accept or reject: the README's table.
var (
	acceptedCategories = []string{"A0", "A1", "A2", "A5", "DR01", "DR02", "DR08"}
	rejectedCategories = []string{"A3", "A4", "A6", "A7", "A8", "DR03", "DR04", "DR05", "DR06", "DR07",
		"E0", "E1", "E2", "E3", "E4"}
)

// Verdict returns the verdict of statuses: rejected when any category
// (STC01-1, STC10-1, STC11-1) rejects, else accepted when any accepts,
// else unknown.
func Verdict(statuses []Status) string {
	v := Unknown
	for _, s := range statuses {
		for _, c := range append([]StatusCode{s.StatusCode}, s.Further...) {
			switch {
			case contains(rejectedCategories, c.Category):
				return Rejected
			case contains(acceptedCategories, c.Category):
				v = Accepted
			}
		}
	}
	return v
}

// Is277CA reports whether a set of group g is a 277CA claim
// acknowledgment: by its ST03, or by the group's GS08 when ST03 is left
// out (it is optional in the X12 standard; g may be nil).
func Is277CA(s *envelope.Set, g *envelope.Group) bool {
	if s.Type != "277" {
		return false
	}
	if s.Implementation != "" {
		return s.Implementation == Implementation277CA
	}
	return g != nil && g.Version == Implementation277CA
}

// Parse277CA returns the statuses of a 277CA set (its segments, ST to SE),
// in set order: batch and provider statuses (loops 2200B, 2200C) with
// their STC segments, and every claim (2200D).
func Parse277CA(segs []envelope.Segment) []ClaimStatus {
	var (
		out                []ClaimStatus
		cur                *ClaimStatus
		line               *LineStatus
		level              string // of the current HL
		source, sourceName string
		provider           string
		batchTrace         string // 2200B TRN02 of the current receiver
	)
	flush := func() {
		if cur != nil && (cur.Level == LevelClaim || len(cur.Statuses) > 0) {
			cur.Verdict = Verdict(cur.Statuses)
			for i := range cur.Lines {
				if cur.Verdict != Rejected && Verdict(cur.Lines[i].Statuses) == Rejected {
					cur.Verdict = Rejected
				}
			}
			if cur.Statuses == nil {
				cur.Statuses = []Status{}
			}
			out = append(out, *cur)
		}
		cur, line = nil, nil
	}
	for _, s := range segs {
		switch s.ID() {
		case "HL":
			flush()
			switch s.Str(3) {
			case "20":
				level = "source"
			case "21":
				level = LevelBatch
				batchTrace, provider = "", ""
			case "19":
				level = LevelProvider
				provider = ""
			case "PT", "22", "23":
				level = LevelClaim
			default:
				level = ""
			}
		case "NM1":
			switch {
			case level == "source":
				source, sourceName = s.Str(8)+":"+s.Str(9), s.Str(3)
			case level == LevelProvider && s.Str(1) == "85":
				provider = s.Str(8) + ":" + s.Str(9)
			}
		case "TRN":
			flush()
			switch level {
			case LevelBatch, LevelProvider, LevelClaim:
				cur = &ClaimStatus{Level: level, Source: source, SourceName: sourceName}
				if level == LevelClaim {
					cur.PatientControlNumber = s.Str(2)
				} else {
					cur.TraceNumber = s.Str(2)
				}
				if level == LevelBatch {
					batchTrace = s.Str(2)
				} else {
					cur.Provider, cur.BatchTrace = provider, batchTrace
				}
			}
		case "STC":
			if cur == nil {
				continue
			}
			st := stc(s)
			if line != nil {
				line.Statuses = append(line.Statuses, st)
			} else {
				cur.Statuses = append(cur.Statuses, st)
			}
		case "SVC":
			if cur == nil || cur.Level != LevelClaim {
				continue
			}
			cur.Lines = append(cur.Lines, LineStatus{Procedure: composite(s, 1), Charge: money(s.Str(2)),
				Revenue: s.Str(4), Units: s.Str(7), Statuses: []Status{}})
			line = &cur.Lines[len(cur.Lines)-1]
		case "REF":
			switch {
			case cur == nil:
			case line != nil:
				if q := s.Str(1); q == "FJ" || q == "6R" {
					line.LineControl = s.Str(2)
				}
			case s.Str(1) == "1K":
				cur.PayerClaimNumber = s.Str(2)
			case s.Str(1) == "D9":
				cur.ClearinghouseTrace = s.Str(2)
			case s.Str(1) == "BLT":
				cur.BillType = s.Str(2)
			}
		case "DTP":
			if cur == nil || s.Str(1) != "472" {
				continue
			}
			from, to := period(s.Str(2), s.Str(3))
			if line != nil {
				line.ServiceFrom, line.ServiceTo = from, to
			} else {
				cur.ServiceFrom, cur.ServiceTo = from, to
			}
		case "QTY":
			if cur == nil {
				continue
			}
			switch s.Str(1) {
			case "90", "QA":
				cur.AcceptedCount = s.Str(2)
			case "AA", "91", "QC":
				cur.RejectedCount = s.Str(2)
			}
		case "AMT":
			if cur == nil {
				continue
			}
			switch s.Str(1) {
			case "YU":
				cur.AcceptedAmount = money(s.Str(2))
			case "YY":
				cur.RejectedAmount = money(s.Str(2))
			}
		}
	}
	flush()
	return out
}

func stc(s envelope.Segment) Status {
	st := Status{StatusCode: statusCode(s, 1), Date: date(s.Str(2)), Action: s.Str(3), Amount: money(s.Str(4))}
	for _, i := range []int{10, 11} {
		if c := statusCode(s, i); c != (StatusCode{}) {
			st.Further = append(st.Further, c)
		}
	}
	return st
}

func statusCode(s envelope.Segment, i int) StatusCode {
	return StatusCode{Category: string(s.Comp(i, 1)), Code: string(s.Comp(i, 2)), Entity: string(s.Comp(i, 3)),
		CodeList: string(s.Comp(i, 4))}
}

// composite returns element i with its components joined by ':'.
func composite(s envelope.Segment, i int) string {
	var b []byte
	for j := 1; ; j++ {
		c := s.Comp(i, j)
		if c == nil {
			break
		}
		if j > 1 {
			b = append(b, ':')
		}
		b = append(b, c...)
	}
	return string(b)
}

// period returns a DTP date (D8) or range (RD8) as from and to.
func period(format, v string) (string, string) {
	if format == "RD8" && len(v) == 17 && v[8] == '-' {
		return date(v[:8]), date(v[9:])
	}
	return date(v), date(v)
}

// money returns an amount, or nil when it is absent or not a number.
func money(v string) *x12.Money {
	if v == "" {
		return nil
	}
	m, err := x12.ParseMoney(v)
	if err != nil {
		return nil
	}
	return &m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
