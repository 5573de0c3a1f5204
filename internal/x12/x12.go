// Package x12 holds what ediwatch's document handlers share: exact money,
// dates, and Problem, a located error in a transaction set's content that
// a 999 reports with IK3 and IK4.
package x12

import (
	"fmt"
	"strings"
)

// Date converts an X12 CCYYMMDD date to YYYY-MM-DD. It reports false for
// anything else.
func Date(s string) (string, bool) {
	if !isDate(s) {
		return "", false
	}
	return s[:4] + "-" + s[4:6] + "-" + s[6:8], true
}

func isDate(s string) bool {
	if len(s) != 8 {
		return false
	}
	for i := 0; i < 8; i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	mm, dd := s[4:6], s[6:8]
	return mm >= "01" && mm <= "12" && dd >= "01" && dd <= "31"
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
