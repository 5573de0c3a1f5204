package reconcile

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/journal"
)

// Removed is a file the journal says a poller deleted or moved from its
// drop whose ingestion the store does not have: its ledger row is gone
// (a failover to a standby that never had the commit, a restore from an
// older backup) or names another version of the file. Its payments
// cannot come back by polling the drop again.
type Removed struct {
	Source string    `json:"source"`
	Path   string    `json:"path"`
	SHA256 string    `json:"sha256"`
	Action string    `json:"action"`
	At     time.Time `json:"at"`
}

// JournalCheck is the comparison of the journal with the store.
type JournalCheck struct {
	// Checked counts the journal's entries in the window.
	Checked int `json:"checked"`
	// Superseded counts entries whose path the ledger holds at a later
	// version, recorded after the entry: the path was uploaded again, so
	// this removal cannot be told from the ledger.
	Superseded int       `json:"superseded"`
	Unknown    []Removed `json:"unknown,omitempty"`
}

// CheckJournal compares the journal's entries (journal.Read) with the
// store's ledger, one query per source and thousand paths, and adds what
// the store lacks to r: any makes it divergent. Ledger rows of
// post-processed files are pruned after retention.keys, so entries
// older than that are not passed.
func CheckJournal(ctx context.Context, ledger inbox.Ledger, entries []journal.Entry, r *Report) error {
	jc := &JournalCheck{Checked: len(entries)}
	bySource := map[string][]journal.Entry{}
	for _, e := range entries {
		bySource[e.Source] = append(bySource[e.Source], e)
	}
	for _, source := range slices.Sorted(func(yield func(string) bool) {
		for s := range bySource {
			if !yield(s) {
				return
			}
		}
	}) {
		es := bySource[source]
		for lo := 0; lo < len(es); lo += 1000 {
			chunk := es[lo:min(len(es), lo+1000)]
			paths := make([]string, len(chunk))
			for i, e := range chunk {
				paths[i] = e.Path
			}
			states, err := ledger.FileStates(ctx, source, paths)
			if err != nil {
				return fmt.Errorf("reconcile: journal: %w", err)
			}
			for _, e := range chunk {
				st, ok := states[e.Path]
				switch {
				case ok && st.SHA256 == e.SHA256:
				case ok && st.UpdatedAt.After(e.At):
					jc.Superseded++
				default:
					jc.Unknown = append(jc.Unknown, Removed{Source: e.Source, Path: e.Path, SHA256: e.SHA256,
						Action: e.Action, At: e.At})
				}
			}
		}
	}
	r.Journal = jc
	if n := len(jc.Unknown); n > 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("%d files removed from their drops (journal) whose ingestion the store no longer has", n))
		slices.Sort(r.Reasons)
		r.Divergent = true
	}
	return nil
}

// printJournal writes the journal's comparison, when one was made.
func (r *Report) printJournal(w io.Writer) {
	if r.Journal == nil {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\njournal entries\t%d\nsuperseded by a later upload\t%d\nremoved, unknown to the store\t%d\n",
		r.Journal.Checked, r.Journal.Superseded, len(r.Journal.Unknown))
	if len(r.Journal.Unknown) > 0 {
		fmt.Fprintf(tw, "\nREMOVED FROM THE DROP, NOT IN THE STORE\nSOURCE\tPATH\tACTION\tAT\tSHA256\n")
		for _, u := range r.Journal.Unknown {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Source, u.Path, u.Action, u.At.Format(time.RFC3339), u.SHA256)
		}
	}
	tw.Flush()
}
