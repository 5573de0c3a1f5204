// Package ack builds the acknowledgments ediwatch sends back to a trading
// partner: a 999 implementation acknowledgment (005010X231A1) per received
// functional group, and a TA1 interchange acknowledgment when the sender
// asked for one (ISA14 = 1) or the interchange envelope is rejected.
package ack

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// ControlNumbers allocates the control numbers of the interchanges
// ediwatch sends. Next returns a number unique to sender (our "qual:id")
// and greater than every number it returned before for that sender; it is
// safe for concurrent use. The store provides a durable one.
type ControlNumbers interface {
	Next(ctx context.Context, sender string) (int64, error)
}

// MemoryControlNumbers is a ControlNumbers held in memory, for `ediwatch
// ack` and tests. The zero value starts at 1.
type MemoryControlNumbers struct {
	// Start is the first number handed out for each sender (default 1).
	Start int64
	mu    sync.Mutex
	next  map[string]int64
}

var _ ControlNumbers = (*MemoryControlNumbers)(nil)

// Next implements ControlNumbers.
func (m *MemoryControlNumbers) Next(_ context.Context, sender string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next == nil {
		m.next = map[string]int64{}
	}
	n, ok := m.next[sender]
	if !ok {
		n = max(m.Start, 1)
	}
	if n > 999999999 {
		return 0, fmt.Errorf("control numbers for %s exhausted", sender)
	}
	m.next[sender] = n + 1
	return n, nil
}

// Party is an interchange id (ISA05/06 or ISA07/08) with the application
// code used in GS02/GS03.
type Party struct {
	Qualifier string
	ID        string
	App       string // GS02/GS03; defaults to ID
}

func (p Party) key() string { return p.Qualifier + ":" + p.ID }

// Options shape the acknowledgments. The zero value answers with our ids
// taken from the received interchange (its receiver becomes our sender).
type Options struct {
	// Us and Them override the ids; empty fields come from the received
	// interchange, swapped.
	Us, Them Party
	// Now stamps the acknowledgment; default time.Now.
	Now func() time.Time
	// EOL follows each segment terminator; default "\n".
	EOL *string
	// Ack277 answers groups of 277 sets with a 999 (the source's ack_277);
	// by default a 277 is an acknowledgment, and acknowledgments are never
	// acknowledged.
	Ack277 bool
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now().UTC()
}

// parties resolves our ids and theirs for a received interchange and group.
func (o Options) parties(ix *envelope.Interchange, g *envelope.Group) (us, them Party) {
	us, them = o.Us, o.Them
	if us.Qualifier == "" || us.ID == "" {
		us.Qualifier, us.ID = ix.ReceiverQualifier, ix.ReceiverID
	}
	if them.Qualifier == "" || them.ID == "" {
		them.Qualifier, them.ID = ix.SenderQualifier, ix.SenderID
	}
	if us.App == "" {
		if g != nil && g.ReceiverCode != "" {
			us.App = g.ReceiverCode
		} else {
			us.App = us.ID
		}
	}
	if them.App == "" {
		if g != nil && g.SenderCode != "" {
			them.App = g.SenderCode
		} else {
			them.App = them.ID
		}
	}
	return us, them
}

// SetResult is what a 999 needs to know about one received set.
type SetResult struct {
	Type           string // ST01
	ControlNumber  string // ST02
	Implementation string // ST03
	// Errors are the set's envelope errors.
	Errors []*envelope.ParseError
	// Problems are the errors its document handler found.
	Problems []x12.Problem
}

// SetResultOf returns the result of a set read by the envelope reader.
func SetResultOf(s *envelope.Set, problems []x12.Problem) SetResult {
	return SetResult{Type: s.Type, ControlNumber: s.ControlNumber, Implementation: s.Implementation,
		Errors: s.Errors, Problems: problems}
}

// Status returns the IK501 code: A accepted, E accepted with errors noted,
// R rejected.
func (s SetResult) Status() string {
	if len(s.Errors) > 0 || x12.Rejects(s.Problems) {
		return "R"
	}
	if len(s.Problems) > 0 {
		return "E"
	}
	return "A"
}

// Accepted reports whether the set is processed (A or E).
func (s SetResult) Accepted() bool { return s.Status() != "R" }

// Wants999 reports whether a group is acknowledged with a 999: every group
// but acknowledgments themselves (GS01 FA), so two systems never ack each
// other's acks.
func Wants999(g *envelope.Group) bool { return g.FunctionalID != "FA" }

// WantsTA1 reports whether an interchange gets a TA1: when ISA14 asks for
// one or its envelope is rejected, unless it carries only acknowledgments.
func WantsTA1(ix *envelope.Interchange, onlyAcks bool) bool {
	if onlyAcks {
		return false
	}
	return ix.AckRequested || !ix.EnvelopeValid()
}

// maxIK3 bounds the segment errors reported per set.
const maxIK3 = 50

// Build999 returns a complete interchange holding the 999 for one received
// group, with our ISA13 and GS06 from cn.
func Build999(ctx context.Context, ix *envelope.Interchange, g *envelope.Group, sets []SetResult,
	cn ControlNumbers, opts Options) ([]byte, error) {
	us, them := opts.parties(ix, g)
	ctl, err := cn.Next(ctx, us.key())
	if err != nil {
		return nil, fmt.Errorf("999 control number: %w", err)
	}
	// The received values the 999 repeats (ids, control numbers, the
	// version) decide its delimiters: a value may hold a canonical one
	// when the partner used others.
	d := delimitersFor(partyValues(us, them, ix.Usage), []string{g.FunctionalID, g.ControlNumber, g.Version},
		setValues(sets))
	var buf bytes.Buffer
	w := newWriter(&buf, d, opts)
	now := opts.now()
	writeISA(w, us, them, ctl, ix.Usage, now)
	w.Segment("GS", "FA", us.App, them.App, now.Format("20060102"), now.Format("1504"),
		strconv.FormatInt(ctl, 10), "X", "005010X231A1")
	body := body999(g, sets, d)
	w.Segment("ST", "999", "0001", "005010X231A1")
	for _, seg := range body {
		w.Segment(seg[0], seg[1:]...)
	}
	w.Segment("SE", strconv.Itoa(len(body)+2), "0001")
	w.Segment("GE", "1", strconv.FormatInt(ctl, 10))
	w.Segment("IEA", "1", fmt.Sprintf("%09d", ctl))
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// body999 returns the segments of a 999 between ST and SE: AK1, the
// answer for each set, AK9.
func body999(g *envelope.Group, sets []SetResult, d envelope.Delimiters) [][]string {
	body := [][]string{{"AK1", g.FunctionalID, g.ControlNumber, g.Version}}
	accepted, noted := 0, 0
	for _, s := range sets {
		body = append(body, setSegments(s, d)...)
		switch s.Status() {
		case "A":
			accepted++
		case "E":
			accepted++
			noted++
		}
	}
	return append(body, ak9(g, len(sets), accepted, noted))
}

// Verdict999 returns what the 999 for a group says, without any control
// number of ours: its AK1..AK9 segments, one per line. Two arrivals of a
// group with the same verdict get the same text; a rejected group and its
// corrected re-send do not.
func Verdict999(g *envelope.Group, sets []SetResult) string {
	var b strings.Builder
	for _, seg := range body999(g, sets, envelope.Canonical) {
		b.WriteString(strings.Join(seg, "*"))
		b.WriteByte('\n')
	}
	return b.String()
}

// VerdictTA1 returns what the TA1 for an interchange says: its
// acknowledgment code and note code (A000, R023...).
func VerdictTA1(ix *envelope.Interchange) string {
	if len(ix.Errors) > 0 {
		return "R" + ix.Errors[0].Cause.Ack
	}
	return "A000"
}

func setSegments(s SetResult, d envelope.Delimiters) [][]string {
	ak2 := []string{"AK2", s.Type, s.ControlNumber}
	if s.Implementation != "" {
		ak2 = append(ak2, s.Implementation)
	}
	out := [][]string{ak2}
	n := 0
	for _, e := range s.Errors {
		if e.Cause.Segment != "" && n < maxIK3 {
			id := e.SegmentID
			if id == "" {
				id = "UNK"
			}
			out = append(out, []string{"IK3", id, strconv.Itoa(e.Position), "", e.Cause.Segment})
			n++
		}
	}
	for _, p := range s.Problems {
		if n >= maxIK3 {
			break
		}
		n++
		out = append(out, []string{"IK3", p.SegmentID, strconv.Itoa(p.Position), p.Loop, p.SegmentCode})
		if p.ContextName != "" && clean(p.ContextName, d) && clean(p.ContextValue, d) {
			out = append(out, []string{"CTX", p.ContextName + string(d.Component) + p.ContextValue})
		}
		if p.Element > 0 {
			pos := strconv.Itoa(p.Element)
			if p.Component > 0 {
				pos += string(d.Component) + strconv.Itoa(p.Component)
			}
			ik4 := []string{"IK4", pos, p.ElementRef, p.ElementCode}
			if v := p.Value; v != "" && clean(v, d) {
				ik4 = append(ik4, truncate(v, 99))
			}
			out = append(out, ik4)
		}
	}
	ik5 := []string{"IK5", s.Status()}
	var codes []string
	for _, e := range s.Errors {
		if e.Cause.Ack != "" && !contains(codes, e.Cause.Ack) {
			codes = append(codes, e.Cause.Ack)
		}
	}
	if len(s.Problems) > 0 && !contains(codes, "5") {
		codes = append(codes, "5") // one or more segments in error
	}
	if len(codes) > 5 {
		codes = codes[:5]
	}
	return append(out, append(ik5, codes...))
}

// ak9 returns the group response: A all accepted, E all accepted and
// some with errors (noted: sets accepted with IK5 E), P some accepted, R
// none (or the group itself bad).
func ak9(g *envelope.Group, received, accepted, noted int) []string {
	included := strconv.Itoa(received)
	if g.DeclaredSets >= 0 {
		included = strconv.Itoa(g.DeclaredSets)
	}
	status := "A"
	switch {
	case len(g.Errors) > 0 || accepted == 0 && received > 0:
		status = "R"
	case accepted < received:
		status = "P"
	case noted > 0 || !g.Valid():
		status = "E"
	}
	if status == "R" {
		accepted = 0
	}
	seg := []string{"AK9", status, included, strconv.Itoa(received), strconv.Itoa(accepted)}
	var codes []string
	for _, e := range g.Errors {
		if !contains(codes, e.Cause.Ack) && len(codes) < 5 {
			codes = append(codes, e.Cause.Ack)
		}
	}
	return append(seg, codes...)
}

// BuildTA1 returns a complete interchange holding the TA1 for a received
// interchange: accepted (A, 000) or rejected (R) with the note code of its
// first envelope error.
func BuildTA1(ctx context.Context, ix *envelope.Interchange, cn ControlNumbers, opts Options) ([]byte, error) {
	us, them := opts.parties(ix, nil)
	v := VerdictTA1(ix)
	code, note := v[:1], v[1:]
	return buildTA1(ctx, us, them, padCtl(ix.ControlNumber), ix.Date, ix.Time, ix.Usage, code, note, cn, opts)
}

// BuildTA1Unreadable returns a TA1 rejecting a file with no readable
// interchange header (note code 022, invalid control structure). There is
// no interchange to take ids from, so us and them must be given.
func BuildTA1Unreadable(ctx context.Context, us, them Party, cn ControlNumbers, opts Options) ([]byte, error) {
	if us.ID == "" || them.ID == "" {
		return nil, fmt.Errorf("a TA1 for an unreadable file needs our and the partner's interchange ids")
	}
	if us.App == "" {
		us.App = us.ID
	}
	now := opts.now()
	return buildTA1(ctx, us, them, "000000000", now.Format("060102"), now.Format("1504"), "P", "R", "022", cn, opts)
}

func buildTA1(ctx context.Context, us, them Party, theirCtl, date, tm, usage, code, note string,
	cn ControlNumbers, opts Options) ([]byte, error) {
	ctl, err := cn.Next(ctx, us.key())
	if err != nil {
		return nil, fmt.Errorf("TA1 control number: %w", err)
	}
	var buf bytes.Buffer
	w := newWriter(&buf, delimitersFor(partyValues(us, them, usage)), opts)
	writeISA(w, us, them, ctl, usage, opts.now())
	w.Segment("TA1", theirCtl, fixed(date, 6), fixed(tm, 4), code, note)
	w.Segment("IEA", "0", fmt.Sprintf("%09d", ctl))
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func newWriter(buf *bytes.Buffer, d envelope.Delimiters, opts Options) *envelope.Writer {
	eol := "\n"
	if opts.EOL != nil {
		eol = *opts.EOL
	}
	return envelope.NewWriter(buf, d, eol)
}

// delimitersFor returns the delimiters of an acknowledgment that repeats
// vals: the canonical ones, each replaced by its first alternative that
// occurs in no value and is not another delimiter. X12 has no escape: a
// delimiter in a value would split it. Values with every choice in them
// (never a real id) keep the canonical delimiter.
func delimitersFor(vals ...[]string) envelope.Delimiters {
	var used [256]bool
	for _, vs := range vals {
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				used[v[i]] = true
			}
		}
	}
	// For each delimiter, the bytes it may be, in order of preference:
	// the canonical one first, so an acknowledgment is written in * ^ : ~
	// unless a value it repeats holds one of them (a partner writing with
	// | and > may have a * in an id).
	choices := [4]string{"*|!+\x1d", "^{}\x1e", ":>\\\x1f", "~'\x1c"}
	var got [4]byte
	for i, cs := range choices {
		got[i] = cs[0]
		for j := 0; j < len(cs); j++ {
			if c := cs[j]; !used[c] {
				got[i] = c
				used[c] = true
				break
			}
		}
	}
	return envelope.Delimiters{Element: got[0], Repetition: got[1], Component: got[2], Segment: got[3]}
}

// partyValues are the interchange values an acknowledgment repeats.
func partyValues(us, them Party, usage string) []string {
	return []string{us.Qualifier, us.ID, us.App, them.Qualifier, them.ID, them.App, usage}
}

// setValues are the received values a 999 repeats for its sets: their
// type, control number and implementation reference, and the segment ids
// and codes of their problems (their values are left out when they hold a
// delimiter).
func setValues(sets []SetResult) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s.Type, s.ControlNumber, s.Implementation)
		for _, p := range s.Problems {
			out = append(out, p.SegmentID, p.Loop, p.SegmentCode, p.ElementRef, p.ElementCode)
		}
	}
	return out
}

func writeISA(w *envelope.Writer, us, them Party, ctl int64, usage string, now time.Time) {
	if usage != "P" && usage != "T" && usage != "I" {
		usage = "P"
	}
	d := w.Delimiters()
	w.ISA([16]string{"00", strings.Repeat(" ", 10), "00", strings.Repeat(" ", 10),
		pad(us.Qualifier, 2), pad(us.ID, 15), pad(them.Qualifier, 2), pad(them.ID, 15),
		now.Format("060102"), now.Format("1504"), string(d.Repetition), "00501", fmt.Sprintf("%09d", ctl), "0", usage,
		string(d.Component)})
}

func pad(s string, n int) string {
	if len(s) >= n {
		return s[:n]
	}
	return s + strings.Repeat(" ", n-len(s))
}

// fixed returns s when it has exactly n digits, else zeros: a TA1 must
// carry well-formed values even when it answers a malformed header.
func fixed(s string, n int) string {
	if len(s) == n {
		if _, err := strconv.Atoi(s); err == nil {
			return s
		}
	}
	return strings.Repeat("0", n)
}

func padCtl(s string) string {
	if _, err := strconv.Atoi(s); err == nil && len(s) <= 9 {
		return strings.Repeat("0", 9-len(s)) + s
	}
	return "000000000"
}

// clean reports whether v can be written with the delimiters d.
func clean(v string, d envelope.Delimiters) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == d.Element || c == d.Repetition || c == d.Component || c == d.Segment || c == '\r' || c == '\n' {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
