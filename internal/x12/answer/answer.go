// Package answer reads what trading partners send back about the documents
// ediwatch's organisation submitted: 999 implementation acknowledgments
// (005010X231A1), TA1 interchange acknowledgments and 277CA claim
// acknowledgments (005010X214). Each becomes one record per acknowledged
// transaction set, TA1 segment or claim status; process turns them into
// ack.received and claim.status events.
//
// The records hold codes, control numbers and the partner's own
// references. A 999's CTX context and a 277CA's patient control number
// (TRN02) may identify a patient: they belong in event payloads, never in
// logs or keys in clear. Bad element values (IK404) are left out.
package answer

import (
	"strconv"
	"strings"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// Verdicts in words.
const (
	Accepted           = "accepted"
	AcceptedWithErrors = "accepted_with_errors"
	PartiallyAccepted  = "partially_accepted"
	Rejected           = "rejected"
	// Unknown is a 277CA status whose categories are none of the table's.
	Unknown = "unknown"
)

// Words returns the verdict of an IK501, AK901 or TA104 code in words:
// A accepted, E accepted_with_errors, P partially_accepted; R and the
// security rejections M, W and X rejected; anything else as written.
func Words(code string) string {
	switch code {
	case "A":
		return Accepted
	case "E":
		return AcceptedWithErrors
	case "P":
		return PartiallyAccepted
	case "R", "M", "W", "X":
		return Rejected
	}
	return code
}

// Acknowledged names what an acknowledgment answers: an interchange (TA1)
// or a transaction set of a functional group (999 AK1 and AK2). A 999
// group response without any AK2 names the group alone.
type Acknowledged struct {
	InterchangeControlNumber string `json:"interchange_control_number,omitempty"` // TA101
	InterchangeDate          string `json:"interchange_date,omitempty"`           // TA102
	InterchangeTime          string `json:"interchange_time,omitempty"`           // TA103
	FunctionalID             string `json:"functional_id,omitempty"`              // AK101
	GroupControlNumber       string `json:"group_control_number,omitempty"`       // AK102
	Version                  string `json:"version,omitempty"`                    // AK103
	SetType                  string `json:"set_type,omitempty"`                   // AK201
	SetControlNumber         string `json:"set_control_number,omitempty"`         // AK202
	Implementation           string `json:"implementation,omitempty"`             // AK203
}

// Ack is one received acknowledgment of one set (999 AK2 loop), one group
// (a 999 group response without AK2) or one interchange (TA1 segment).
type Ack struct {
	// Type is "999" or "TA1".
	Type         string       `json:"type"`
	Acknowledges Acknowledged `json:"acknowledges"`
	// Verdict is IK501 (or AK901 when there is no AK2, TA104) in words.
	Verdict string `json:"verdict"`
	// Code is the verdict as written (IK501, AK901 or TA104).
	Code string `json:"code"`
	// Codes are IK502..IK506, or TA105 (the note code).
	Codes []string `json:"codes,omitempty"`
	// GroupVerdict and GroupCode are the group's AK901, in words and as
	// written; GroupCodes its AK905..AK909; GroupCounts AK902..AK904.
	GroupVerdict string       `json:"group_verdict,omitempty"`
	GroupCode    string       `json:"group_code,omitempty"`
	GroupCodes   []string     `json:"group_codes,omitempty"`
	GroupCounts  *GroupCounts `json:"group_counts,omitempty"`
	// Errors are the located errors of the set (IK3 loops).
	Errors []SegmentError `json:"errors,omitempty"`
}

// GroupCounts are AK902 (sets included), AK903 (received), AK904
// (accepted), as written.
type GroupCounts struct {
	Included string `json:"included"`
	Received string `json:"received"`
	Accepted string `json:"accepted"`
}

// SegmentError is one IK3 loop: a segment in error, its context and its
// element errors.
type SegmentError struct {
	SegmentID string         `json:"segment_id"`         // IK301
	Position  int            `json:"position,omitempty"` // IK302
	Loop      string         `json:"loop,omitempty"`     // IK303
	Code      string         `json:"code"`               // IK304
	Context   []Context      `json:"context,omitempty"`  // CTX after IK3
	Elements  []ElementError `json:"elements,omitempty"` // IK4 loops
}

// ElementError is one IK4 loop. The bad value (IK404) is left out: it may
// be patient data.
type ElementError struct {
	Position   int       `json:"position"`             // IK401-1
	Component  int       `json:"component,omitempty"`  // IK401-2
	Repetition int       `json:"repetition,omitempty"` // IK401-3
	Reference  string    `json:"reference,omitempty"`  // IK402
	Code       string    `json:"code"`                 // IK403
	Context    []Context `json:"context,omitempty"`    // CTX after IK4
}

// Context is a CTX segment: the business unit (CTX01, e.g. CLM01 and the
// claim's patient control number) or the situational trigger's location.
type Context struct {
	Name      string `json:"name"`                // CTX01-1
	Reference string `json:"reference,omitempty"` // CTX01-2
	SegmentID string `json:"segment_id,omitempty"`
	Position  int    `json:"position,omitempty"`
	Loop      string `json:"loop,omitempty"`
	Element   string `json:"element,omitempty"` // CTX05, components joined by ':'
}

// Parse999 returns the acknowledgments of a 999 set (its segments, ST to
// SE): one per AK2 loop, or one for the group when it has none, each with
// the group's AK9 beside it.
func Parse999(segs []envelope.Segment) []Ack {
	var (
		out    []Ack
		head   Acknowledged
		cur    *Ack
		seg    *SegmentError
		el     *ElementError
		ak9    []string
		counts *GroupCounts
		hasAK9 bool
	)
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
		}
		cur, seg, el = nil, nil, nil
	}
	for _, s := range segs {
		switch s.ID() {
		case "AK1":
			flush()
			head = Acknowledged{FunctionalID: s.Str(1), GroupControlNumber: s.Str(2), Version: s.Str(3)}
		case "AK2":
			flush()
			a := head
			a.SetType, a.SetControlNumber, a.Implementation = s.Str(1), s.Str(2), s.Str(3)
			cur = &Ack{Type: "999", Acknowledges: a}
		case "IK3":
			if cur == nil {
				continue
			}
			cur.Errors = append(cur.Errors, SegmentError{SegmentID: s.Str(1), Position: atoi(s.Str(2)),
				Loop: s.Str(3), Code: s.Str(4)})
			seg, el = &cur.Errors[len(cur.Errors)-1], nil
		case "CTX":
			if seg == nil {
				continue
			}
			c := context(s)
			if el != nil {
				el.Context = append(el.Context, c)
			} else {
				seg.Context = append(seg.Context, c)
			}
		case "IK4":
			if seg == nil {
				continue
			}
			seg.Elements = append(seg.Elements, ElementError{Position: atoi(string(s.Comp(1, 1))),
				Component: atoi(string(s.Comp(1, 2))), Repetition: atoi(string(s.Comp(1, 3))),
				Reference: s.Str(2), Code: s.Str(3)})
			el = &seg.Elements[len(seg.Elements)-1]
		case "IK5":
			if cur == nil {
				continue
			}
			cur.Code, cur.Verdict = s.Str(1), Words(s.Str(1))
			cur.Codes = elems(s, 2, 6)
		case "AK9":
			flush()
			hasAK9 = true
			ak9 = append([]string{s.Str(1)}, elems(s, 5, 9)...)
			counts = &GroupCounts{Included: s.Str(2), Received: s.Str(3), Accepted: s.Str(4)}
		}
	}
	flush()
	if !hasAK9 {
		return out
	}
	if len(out) == 0 {
		// A group response alone: the group was rejected (or accepted)
		// as a whole.
		out = append(out, Ack{Type: "999", Acknowledges: head, Code: ak9[0], Verdict: Words(ak9[0])})
	}
	for i := range out {
		out[i].GroupCode, out[i].GroupVerdict = ak9[0], Words(ak9[0])
		out[i].GroupCodes, out[i].GroupCounts = ak9[1:], counts
		if len(out[i].GroupCodes) == 0 {
			out[i].GroupCodes = nil
		}
	}
	return out
}

// FromTA1 returns the acknowledgment a TA1 segment carries.
func FromTA1(t envelope.TA1) Ack {
	a := Ack{Type: "TA1", Acknowledges: Acknowledged{InterchangeControlNumber: t.ControlNumber,
		InterchangeDate: t.Date, InterchangeTime: t.Time}, Code: t.AckCode, Verdict: Words(t.AckCode)}
	if t.NoteCode != "" {
		a.Codes = []string{t.NoteCode}
	}
	return a
}

func context(s envelope.Segment) Context {
	c := Context{Name: string(s.Comp(1, 1)), Reference: string(s.Comp(1, 2)), SegmentID: s.Str(2),
		Position: atoi(s.Str(3)), Loop: s.Str(4)}
	var parts []string
	for j := 1; ; j++ {
		p := s.Comp(5, j)
		if p == nil {
			break
		}
		parts = append(parts, string(p))
	}
	c.Element = strings.TrimRight(strings.Join(parts, ":"), ":")
	return c
}

// elems returns the non-empty elements from..to of s.
func elems(s envelope.Segment, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		if v := s.Str(i); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0
	}
	return n
}

// date returns an X12 date as YYYY-MM-DD, or as written when it is not
// CCYYMMDD.
func date(s string) string {
	if d, ok := x12.Date(s); ok {
		return d
	}
	return s
}
