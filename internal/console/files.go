package console

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
)

// detailLimit bounds the sets and effects a file's page lists, and
// attemptsShown the effects whose attempt history it reads.
const (
	detailLimit   = 1000
	attemptsShown = 100
)

// fileStatuses are the ledger statuses a filter offers.
func fileStatuses() []string {
	return []string{string(inbox.FileIngested), string(inbox.FileRejected), string(inbox.FileRetrying), string(inbox.FileFailed)}
}

// shownKey is a key as a page shows it: envelope keys (sender, receiver
// and control numbers), raw-file digests and the effect keys of payments
// and of our acknowledgments as they are; any other key (a claim's may
// name a patient control number) digested.
func shownKey(key string) string {
	for _, p := range []string{"x12:", "sha256:", "payment:", "ack999:", "ta1:"} {
		if strings.HasPrefix(key, p) {
			return key
		}
	}
	kind, _, _ := strings.Cut(key, ":")
	return sink.LogKey(kind+".key", key)
}

type filesFilter struct {
	Source, Status, Since, Until string
}

type filesData struct {
	Filter    filesFilter
	Error     string
	Files     []fileRowView
	Truncated bool
	Sources   []string
	Statuses  []string
}

// files lists the ledger: recent files filtered by source, status and
// when they were last recorded.
func (c *Console) files(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	shown := filesFilter{Source: q.Get("source"), Status: q.Get("status"), Since: q.Get("since"), Until: q.Get("until")}
	data := filesData{Filter: shown, Sources: c.cfg.Sources, Statuses: fileStatuses()}
	f, err := parseFileFilter(q, c.cfg.Now())
	if err != nil {
		data.Error = err.Error()
		c.render(w, r, http.StatusBadRequest, "files", data)
		return
	}
	rows, err := c.st.ListFiles(r.Context(), f, listLimit+1)
	if err != nil {
		c.fail(w, err)
		return
	}
	if len(rows) > listLimit {
		rows, data.Truncated = rows[:listLimit], true
	}
	// The page's sets by outcome, in one reading for every row.
	ids := make([]string, 0, len(rows))
	for _, f := range rows {
		if f.CorrelationID != "" {
			ids = append(ids, f.CorrelationID)
		}
	}
	outcomes, err := c.st.FileOutcomes(r.Context(), ids)
	if err != nil {
		c.fail(w, err)
		return
	}
	for _, f := range rows {
		v := fileRowView{FileRow: f}
		if f.CorrelationID != "" {
			v.Outcomes = viewOutcomes(outcomes[f.CorrelationID])
		}
		data.Files = append(data.Files, v)
	}
	c.render(w, r, http.StatusOK, "files", data)
}

// fileRowView is a ledger row with its last arrival's sets by outcome.
type fileRowView struct {
	inbox.FileRow
	Outcomes []outcomeCount
}

type outcomeCount struct {
	Outcome string
	N       int
	// OK: a set processed, or seen again without conflict.
	OK bool
}

// outcomeRank orders the outcomes a row lists; others follow by name.
func outcomeRank(k string) int {
	order := [...]string{"processed", "duplicate", "business_duplicate", "rejected", "conflict", "effect_conflict"}
	if i := slices.Index(order[:], k); i >= 0 {
		return i
	}
	return len(order)
}

func viewOutcomes(m map[string]int) []outcomeCount {
	out := make([]outcomeCount, 0, len(m))
	for k, n := range m {
		out = append(out, outcomeCount{Outcome: k, N: n, OK: k == "processed" || k == "duplicate" || k == "business_duplicate"})
	}
	slices.SortFunc(out, func(a, b outcomeCount) int {
		if d := outcomeRank(a.Outcome) - outcomeRank(b.Outcome); d != 0 {
			return d
		}
		return strings.Compare(a.Outcome, b.Outcome)
	})
	return out
}

func parseFileFilter(q url.Values, now time.Time) (inbox.FileFilter, error) {
	f := inbox.FileFilter{Source: strings.TrimSpace(q.Get("source")), Status: inbox.FileStatus(strings.TrimSpace(q.Get("status")))}
	for _, b := range []struct {
		key string
		to  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := strings.TrimSpace(q.Get(b.key)); v != "" {
			t, err := parseWhen(v, now)
			if err != nil {
				return f, &fieldError{b.key, err}
			}
			*b.to = t
		}
	}
	return f, nil
}

// fieldError names the form field a bad value came in.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }

type setView struct {
	Key, Outcome, Type, Reason string
	Sighting                   bool
	At                         time.Time
}

type effectView struct {
	deadRow
	Attempts    []attemptView
	AttemptsCut bool
}

type fileData struct {
	File    inbox.FileRow
	Sets    []setView
	Effects []effectView
	Counts  map[string]int
}

// file shows one arrival: its ledger row, its sets by outcome, the
// effects it produced and every delivery attempt of each.
func (c *Console) file(w http.ResponseWriter, r *http.Request) {
	d, err := c.st.FileDetail(r.Context(), r.PathValue("id"), detailLimit)
	if err != nil {
		c.fail(w, err)
		return
	}
	data := fileData{File: d.File, Counts: map[string]int{}}
	for _, s := range d.Sets {
		data.Sets = append(data.Sets, setView{Key: shownKey(s.Key), Outcome: s.Outcome, Type: s.Type, Reason: s.Reason,
			Sighting: s.Sighting, At: s.At})
		data.Counts[s.Outcome]++
	}
	for i, e := range d.Effects {
		v := effectView{deadRow: viewRow(e)}
		if i < attemptsShown {
			attempts, err := c.st.Attempts(r.Context(), e.ID)
			if err != nil {
				c.fail(w, err)
				return
			}
			v.Attempts = viewAttempts(attempts)
		} else {
			v.AttemptsCut = true
		}
		data.Effects = append(data.Effects, v)
	}
	c.render(w, r, http.StatusOK, "file", data)
}

func viewAttempts(attempts []outbox.Attempt) []attemptView {
	out := make([]attemptView, 0, len(attempts))
	for _, a := range attempts {
		out = append(out, attemptView{Seq: a.Seq, Number: a.Number, At: a.At,
			Latency: a.Latency.Round(time.Millisecond).String(), HTTPStatus: a.HTTPStatus, Class: a.Class,
			Error: a.Error, ResponseSize: a.ResponseSize})
	}
	return out
}
