// Package reconcile compares what ediwatch parsed, enqueued and delivered,
// per payer with exact money totals, and per source and day what it saw,
// ingested and rejected. A divergence — a parsed payment without exactly one
// outbox row, a dead or stuck row — is what an operator must look at.
package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// Payer is one payer's totals. Amounts are exact decimals.
type Payer struct {
	PayerID         string    `json:"payer_id"`
	Parsed          int       `json:"parsed"`
	ParsedAmount    x12.Money `json:"parsed_amount"`
	Enqueued        int       `json:"enqueued"`
	EnqueuedAmount  x12.Money `json:"enqueued_amount"`
	Delivered       int       `json:"delivered"`
	DeliveredAmount x12.Money `json:"delivered_amount"`
	Unbalanced      int       `json:"unbalanced"`
	MissingEffects  []string  `json:"missing_effects,omitempty"` // parsed, never enqueued
	UnknownEffects  []string  `json:"unknown_effects,omitempty"` // enqueued, no parsed document in the window
}

// Report is one reconciliation.
type Report struct {
	Since  time.Time       `json:"since"`
	Payers []*Payer        `json:"payers"`
	Files  []store.FileDay `json:"files"`
	Dead   int             `json:"dead"`
	Stuck  int             `json:"stuck"`
	// Conflicts are the key and effect conflicts recorded since: content
	// that was quarantined, not posted, and awaits an operator's review.
	// They are alerted on by the conflict metric and do not by themselves
	// make the report divergent: what was posted still matches what was
	// processed.
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Divergent bool       `json:"divergent"`
	Reasons   []string   `json:"reasons,omitempty"`
	// Journal, when the report was asked with a journal, compares it
	// with the store (CheckJournal).
	Journal *JournalCheck `json:"journal,omitempty"`
}

// Conflict is one recorded conflict. Kind "conflict": an envelope key
// re-sent with other content (Key is the envelope key); "effect_conflict":
// a business key (payment payer and trace, or a claim's digest) re-sent
// with other content, e.g. another amount (Key is the effect key). No
// patient data.
type Conflict struct {
	Kind                  string    `json:"kind"`
	Key                   string    `json:"key"`
	Source                string    `json:"source"`
	Path                  string    `json:"path"`
	CorrelationID         string    `json:"correlation_id"`
	OriginalCorrelationID string    `json:"original_correlation_id"`
	At                    time.Time `json:"at"`
}

type summary struct {
	TraceNumber string    `json:"trace_number"`
	PayerID     string    `json:"payer_id"`
	Amount      x12.Money `json:"amount"`
	Balanced    bool      `json:"balanced"`
}

type payload struct {
	PayerID string
	Amount  x12.Money
}

// Run reconciles since a time; rows undelivered for longer than stuckAfter
// are stuck. The window's closed days are read from their rollups (Fold)
// where they have one, the rest live: the store streams those payments by
// business key (store.PaymentFact), so Run holds one key's rows at a
// time and the payers' totals, whatever the window's length.
func Run(ctx context.Context, r store.Reconciler, since time.Time, stuckAfter time.Duration, now time.Time) (*Report, error) {
	f, err := r.ReconcileCounts(ctx, since, now.Add(-stuckAfter))
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	payers, err := payments(ctx, r, since, now)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	rep := &Report{Since: since, Files: f.Files, Dead: f.Dead, Stuck: f.Stuck}
	for _, c := range f.Conflicts {
		rep.Conflicts = append(rep.Conflicts, Conflict{Kind: c.Kind, Key: c.Key, Source: c.Source, Path: c.Path,
			CorrelationID: c.CorrelationID, OriginalCorrelationID: c.OriginalCorrelationID, At: c.At})
	}
	for _, p := range payers {
		sort.Strings(p.MissingEffects)
		sort.Strings(p.UnknownEffects)
		rep.Payers = append(rep.Payers, p)
		if len(p.MissingEffects) > 0 {
			rep.Reasons = append(rep.Reasons, fmt.Sprintf("payer %s: %d parsed payments have no outbox row", p.PayerID, len(p.MissingEffects)))
		}
		if p.Parsed == p.Enqueued && !p.ParsedAmount.Equal(p.EnqueuedAmount) {
			rep.Reasons = append(rep.Reasons, fmt.Sprintf("payer %s: parsed %s but enqueued %s", p.PayerID, p.ParsedAmount, p.EnqueuedAmount))
		}
	}
	sort.Slice(rep.Payers, func(i, j int) bool { return rep.Payers[i].PayerID < rep.Payers[j].PayerID })
	if f.Dead > 0 {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%d dead-lettered rows", f.Dead))
	}
	if f.Stuck > 0 {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%d rows undelivered for more than %s", f.Stuck, stuckAfter))
	}
	sort.Strings(rep.Reasons)
	rep.Divergent = len(rep.Reasons) > 0
	return rep, nil
}

// matcher matches, key by key, the payments parsed in a stretch of time
// with those enqueued, and totals them per payer (a stretch). A payment
// with a row created before the stretch is not the stretch's: a
// regenerated 835, or a row for a sink its route gained, counts where its
// first row was created.
type matcher struct {
	st *stretch
	// The key being read: its first readable summary (a regenerated
	// document is parsed twice but is one payment: each business key
	// counts once), its effect, and whether it has a row before.
	key    string
	parsed *summary
	effect *payload
	before bool
	// orphans are the keys parsed with no row in the stretch, counted
	// once it is known whether they have a row before (resolve).
	orphans []orphan
}

type orphan struct {
	key string
	s   summary
}

// add reads one fact; a new key first totals the last. Facts out of
// key order (byte order, as both drivers sort) are an error: they would
// be counted twice.
func (m *matcher) add(pf store.PaymentFact) error {
	if m.key != "" && pf.Key < m.key {
		return fmt.Errorf("payment facts out of key order: %q after %q", pf.Key, m.key)
	}
	if pf.Key != m.key {
		m.flush()
		m.key = pf.Key
	}
	m.before = m.before || pf.Before
	if p := pf.Parsed; p != nil && m.parsed == nil {
		var s summary
		if err := json.Unmarshal(p.Summary, &s); err == nil && s.PayerID != "" &&
			"payment:"+s.PayerID+":"+s.TraceNumber == pf.Key {
			m.parsed = &s
		}
	}
	if e := pf.Enqueued; e != nil && m.effect == nil {
		if amount, ok := enqueuedAmount(e); ok { // else the key's next row may be read
			m.effect = &payload{PayerID: e.PayerID, Amount: amount}
		}
	}
	return nil
}

// enqueuedAmount reads a payment row's amount: a payload without one
// counts as zero, an unreadable one not at all.
func enqueuedAmount(e *store.EnqueuedPayment) (x12.Money, bool) {
	if e.Amount == "" {
		return x12.Money{}, true
	}
	amount, err := x12.ParseMoney(e.Amount)
	return amount, err == nil
}

// flush totals the key read.
func (m *matcher) flush() {
	switch s, ef := m.parsed, m.effect; {
	case m.before:
	case ef == nil && s != nil:
		m.orphans = append(m.orphans, orphan{m.key, *s})
	case ef != nil:
		if s != nil {
			m.st.parsed(m.key, *s, false)
		}
		m.st.enqueued(m.key, *ef, s == nil)
	}
	m.key, m.parsed, m.effect, m.before = "", nil, nil, false
}

// resolve counts the orphans of a stretch that starts at from: a key with
// a row before is a regenerated document of a payment counted there, any
// other a missing effect.
func (m *matcher) resolve(ctx context.Context, r store.Reconciler, from time.Time) error {
	keys := make([]string, len(m.orphans))
	for i, o := range m.orphans {
		keys[i] = o.key
	}
	before, err := enqueuedBefore(ctx, r, keys, from)
	if err != nil {
		return err
	}
	for _, o := range m.orphans {
		if !before[o.key] {
			m.st.parsed(o.key, o.s, true)
		}
	}
	m.orphans = nil
	return nil
}

// Print writes the report as tables.
func (r *Report) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "since %s\n\nSOURCE\tDAY\tSTATUS\tFILES\n", r.Since.Format(time.RFC3339))
	for _, f := range r.Files {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", f.Source, f.Day, f.Status, f.Files)
	}
	fmt.Fprintf(tw, "\nPAYER\tPARSED\tAMOUNT\tENQUEUED\tAMOUNT\tDELIVERED\tAMOUNT\tUNBALANCED\n")
	for _, p := range r.Payers {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%s\t%d\n", p.PayerID, p.Parsed, p.ParsedAmount, p.Enqueued,
			p.EnqueuedAmount, p.Delivered, p.DeliveredAmount, p.Unbalanced)
	}
	fmt.Fprintf(tw, "\ndead rows\t%d\nstuck rows\t%d\nconflicts\t%d\n", r.Dead, r.Stuck, len(r.Conflicts))
	if len(r.Conflicts) > 0 {
		fmt.Fprintf(tw, "\nCONFLICTS (quarantined, not posted; review)\nKIND\tKEY\tSOURCE\tPATH\tCORRELATION\tORIGINAL\tAT\n")
		for _, c := range r.Conflicts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Kind, c.Key, c.Source, c.Path, c.CorrelationID,
				c.OriginalCorrelationID, c.At.Format(time.RFC3339))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r.printJournal(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if r.Divergent {
		fmt.Fprintln(tw, "\nDIVERGENT:")
		for _, reason := range r.Reasons {
			fmt.Fprintf(tw, "  %s\n", reason)
		}
	} else {
		fmt.Fprintln(tw, "\nno divergence")
	}
	return tw.Flush()
}
