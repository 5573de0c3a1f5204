// Package x12 holds what ediwatch's document handlers share: exact money,
// dates, and Problem, a located error in a transaction set's content that
// a 999 reports with IK3 and IK4.
package x12

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"
)

// Money is an exact decimal amount. It is never a float: it is parsed
// from the X12 text, summed exactly, and written to JSON as a string that
// keeps at least two decimal places and never loses precision.
type Money struct{ d decimal.Decimal }

// ParseMoney parses an X12 R (decimal) value: optional sign, digits, an
// optional decimal point. No exponent, no thousands separators.
func ParseMoney(s string) (Money, error) {
	if s == "" {
		return Money{}, fmt.Errorf("empty amount")
	}
	digits, dot := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		case c == '-' && i == 0:
		default:
			return Money{}, fmt.Errorf("invalid character %q in amount", c)
		}
	}
	if digits == 0 || digits > 18 {
		return Money{}, fmt.Errorf("amount must have 1 to 18 digits")
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return Money{}, err
	}
	return Money{d}, nil
}

// MustMoney parses s or panics; for tests and constants.
func MustMoney(s string) Money {
	m, err := ParseMoney(s)
	if err != nil {
		panic(err)
	}
	return m
}

func (m Money) Add(o Money) Money        { return Money{m.d.Add(o.d)} }
func (m Money) Sub(o Money) Money        { return Money{m.d.Sub(o.d)} }
func (m Money) Neg() Money               { return Money{m.d.Neg()} }
func (m Money) Equal(o Money) bool       { return m.d.Equal(o.d) }
func (m Money) IsZero() bool             { return m.d.IsZero() }
func (m Money) Cmp(o Money) int          { return m.d.Cmp(o.d) }
func (m Money) Decimal() decimal.Decimal { return m.d }

// String returns the amount with at least two decimal places.
func (m Money) String() string {
	if m.d.Exponent() >= -2 {
		return m.d.StringFixed(2)
	}
	return m.d.String()
}

// MarshalJSON writes the amount as a JSON string, e.g. "150.00".
func (m Money) MarshalJSON() ([]byte, error) {
	// Digits, a sign and a point never need JSON escaping.
	s := m.String()
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// UnmarshalJSON reads an amount written by MarshalJSON.
func (m *Money) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseMoney(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Sum adds amounts.
func Sum(ms ...Money) Money {
	var t Money
	for _, m := range ms {
		t = t.Add(m)
	}
	return t
}

// Date converts an X12 CCYYMMDD date to YYYY-MM-DD. It reports false for
// anything else.
func Date(s string) (string, bool) {
	if len(s) != 8 {
		return "", false
	}
	for i := 0; i < 8; i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", false
		}
	}
	mm, dd := s[4:6], s[6:8]
	if mm < "01" || mm > "12" || dd < "01" || dd > "31" {
		return "", false
	}
	return s[:4] + "-" + mm + "-" + dd, true
}

// Problem is a located error in a transaction set's content. It is
// reported in a 999 as IK3 (the segment) and, when Element is set, IK4
// (the element). Its Message names the rule, never the value, so it is
// safe to log; Value holds the bad value for the 999's IK404 only.
type Problem struct {
	SegmentID string // IK301
	Position  int    // IK302: position in the set, ST = 1
	Loop      string // IK303, e.g. "2100"; may be empty
	// SegmentCode is IK304: 3 required segment missing, 8 segment has data
	// element errors, 1 unrecognized, 2 unexpected, 7 not in sequence.
	SegmentCode string
	Element     int    // IK401-1, 0 when the problem is the segment
	Component   int    // IK401-2, 0 when not a composite
	ElementRef  string // IK402, the data element reference number
	// ElementCode is IK403: 1 required missing, 6 invalid character, 7
	// invalid code, 8 invalid date.
	ElementCode string
	Value       string `json:"-"` // IK404: the bad value, sent to the partner only
	Message     string
	// Reject is true when the set cannot be processed (the money or the
	// business key depends on it): IK5 R, nothing posted. Otherwise the
	// set is accepted with the error noted: IK5 E.
	Reject bool
	// Context is a business identifier of the loop the problem is in
	// (CTX), e.g. "CLM01" and the claim id.
	ContextName  string `json:"-"`
	ContextValue string `json:"-"`
}

// Rejects reports whether any of problems rejects its set.
func Rejects(problems []Problem) bool {
	for _, p := range problems {
		if p.Reject {
			return true
		}
	}
	return false
}

func (p Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at position %d", p.SegmentID, p.Position)
	if p.Element > 0 {
		fmt.Fprintf(&b, " element %02d", p.Element)
		if p.Component > 0 {
			fmt.Fprintf(&b, "-%d", p.Component)
		}
	}
	b.WriteString(": ")
	b.WriteString(p.Message)
	return b.String()
}
