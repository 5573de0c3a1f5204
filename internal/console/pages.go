package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
)

// listLimit bounds the rows a listing shows; actions on "all matching"
// rows are not bounded by it.
const listLimit = 500

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	Role  string
	Admin bool
	CSRF  string
	Data  any
}

func (c *Console) parseTemplates() error {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	funcs := template.FuncMap{"when": when, "age": age}
	c.pages = map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return nil
}

// when formats a time for a page: UTC to the second, "never" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// age formats a duration coarsely: 42s, 5m, 3h20m, 2d4h.
func age(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// render executes the page template name with data, then writes it with
// status; a template error is a 500 and nothing of the page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	caller := whoOf(r)
	p := page{Title: name, Nav: name, Role: caller.role.String(), Admin: caller.role == roleAdmin, CSRF: caller.csrf, Data: data}
	var b bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		c.log.Error("console: render", zap.String("page", name), zap.Error(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	releaseSlot(r) // a slow client holds no slot while it reads the page
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail answers a store error: 404 for a missing row, else 500 (the
// error is logged, not shown).
func (c *Console) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, outbox.ErrNotFound) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	c.log.Error("console: store", zap.Error(err))
	http.Error(w, "internal error", http.StatusInternalServerError)
}

func zapRemote(r *http.Request) zap.Field { return zap.String("remote", remoteHost(r)) }
func zapRole(rl role) zap.Field           { return zap.String("role", rl.String()) }

// --- dead letters ---

// dlqFilter is a dead-letter filter as the page's form holds it; Since
// and Until are RFC 3339 times or durations back from now (36h).
type dlqFilter struct {
	Sink, Kind, Since, Until string
}

// Query returns f as a query string.
func (f dlqFilter) Query() string {
	v := url.Values{}
	for k, s := range map[string]string{"sink": f.Sink, "kind": f.Kind, "since": f.Since, "until": f.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// parseFilter reads the filter fields of form, resolving relative times
// against now: the returned dlqFilter holds them as RFC 3339, so a
// confirmation acts on the rows it showed.
func parseFilter(form url.Values, now time.Time) (outbox.DeadFilter, dlqFilter, error) {
	f := outbox.DeadFilter{Sink: strings.TrimSpace(form.Get("sink")), Kind: strings.TrimSpace(form.Get("kind"))}
	shown := dlqFilter{Sink: f.Sink, Kind: f.Kind}
	for _, b := range []struct {
		key   string
		to    *time.Time
		shown *string
	}{{"since", &f.Since, &shown.Since}, {"until", &f.Until, &shown.Until}} {
		v := strings.TrimSpace(form.Get(b.key))
		if v == "" {
			continue
		}
		t, err := parseWhen(v, now)
		if err != nil {
			return f, shown, fmt.Errorf("%s: %w", b.key, err)
		}
		*b.to, *b.shown = t, t.UTC().Format(time.RFC3339)
	}
	return f, shown, nil
}

// parseWhen reads a time given as RFC 3339 or as a duration back from
// now (36h, or whole days: 7d).
func parseWhen(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 && n <= 100000 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration such as 36h or 7d", v)
	}
	return now.Add(-d), nil
}

// parseIDs reads the ids of form: repeated ids fields, each one id or a
// comma-separated list.
func parseIDs(form url.Values) ([]int64, error) {
	var ids []int64
	for _, v := range form["ids"] {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= 0 {
				return nil, fmt.Errorf("not a row id: %q", s)
			}
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// deadRow is a dead row as a page shows it: no payload, no response,
// the effect key digested where it may name a patient.
type deadRow struct {
	ID                   int64
	Sink, Kind, Key      string
	Status               string
	Attempts, LastStatus int
	LastError            string
	DeadAt, CreatedAt    time.Time
	CorrelationID        string
	ErrorHistory         []string
	AgeFrom              time.Time
}

func viewRow(r outbox.Row) deadRow {
	d := deadRow{ID: r.ID, Sink: r.Sink, Kind: r.Kind, Key: sink.LogKey(r.Kind, r.EffectKey), Status: r.Status,
		Attempts: r.Attempts, LastStatus: r.LastStatus, LastError: r.LastError, DeadAt: r.UpdatedAt,
		CreatedAt: r.CreatedAt, CorrelationID: r.CorrelationID, AgeFrom: r.AgeFrom}
	for l := range strings.SplitSeq(r.ErrorHistory, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			d.ErrorHistory = append(d.ErrorHistory, l)
		}
	}
	return d
}

type dlqData struct {
	Filter    dlqFilter
	Error     string
	Rows      []deadRow
	Truncated bool
	Sinks     []string
	Kinds     []string
	Done      string
}

// kinds returns the effect kinds a filter offers.
func kinds() []string {
	return []string{"payment.posted", "claim.received", "claim.status", "ack.received", "ack.999", "ack.ta1", outbox.KindDeliveryDead}
}

func (c *Console) dlq(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Now()
	f, shown, err := parseFilter(r.URL.Query(), now)
	shown.Since, shown.Until = r.URL.Query().Get("since"), r.URL.Query().Get("until")
	data := dlqData{Filter: shown, Sinks: c.cfg.Sinks, Kinds: kinds()}
	if err != nil {
		data.Error = err.Error()
		c.render(w, r, http.StatusBadRequest, "dlq", data)
		return
	}
	rows, err := c.st.ListDeadBrief(r.Context(), f, listLimit+1)
	if err != nil {
		c.fail(w, err)
		return
	}
	if len(rows) > listLimit {
		rows, data.Truncated = rows[:listLimit], true
	}
	for _, row := range rows {
		data.Rows = append(data.Rows, viewRow(row))
	}
	if n, err := strconv.Atoi(r.URL.Query().Get("n")); err == nil {
		switch r.URL.Query().Get("done") {
		case "replay":
			data.Done = fmt.Sprintf("%d rows queued for delivery again.", n)
		case "discard":
			data.Done = fmt.Sprintf("%d rows discarded.", n)
		}
	}
	c.render(w, r, http.StatusOK, "dlq", data)
}

type attemptView struct {
	Seq, Number  int
	At           time.Time
	Latency      string
	HTTPStatus   int
	Class, Error string
	ResponseSize int64
}

type rowData struct {
	Row      deadRow
	Attempts []attemptView
}

func (c *Console) dlqRow(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, "not a row id", http.StatusNotFound)
		return
	}
	row, err := c.st.GetOutbox(r.Context(), id)
	if err != nil {
		c.fail(w, err)
		return
	}
	attempts, err := c.st.Attempts(r.Context(), id)
	if err != nil {
		c.fail(w, err)
		return
	}
	data := rowData{Row: viewRow(row), Attempts: viewAttempts(attempts)}
	c.render(w, r, http.StatusOK, "row", data)
}

type confirmData struct {
	Verb   string
	Action string
	Filter dlqFilter
	All    bool
	IDs    string
	Count  int
	// Passed counts the claim events among them that a later event of
	// the same claim passed (DeadFilter.Passed): replayed, they arrive
	// after it.
	Passed    int
	Rows      []deadRow
	Truncated bool
	// Cancel links back to the dead-letter page with its filter (built
	// from url.Values.Encode, so safe as a URL).
	Cancel template.URL
}

// dlqAct replays or discards the selected dead rows (ids=…, or all=true
// for every row the filter selects). A signed-in person first gets a
// confirmation listing the rows; confirm=yes acts. A bearer caller acts
// at once and gets the count as text.
func (c *Console) dlqAct(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	verb := path.Base(r.URL.Path)
	now := c.cfg.Now()
	f, shown, err := parseFilter(r.PostForm, now)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	all := r.PostFormValue("all") == "true"
	if !all {
		if f.IDs, err = parseIDs(r.PostForm); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(f.IDs) == 0 {
			http.Error(w, "select rows (ids=…) or all matching (all=true)", http.StatusBadRequest)
			return
		}
	}
	caller := whoOf(r)
	if caller.csrf != "" && r.PostFormValue("confirm") != "yes" {
		// The confirmation's form pins the filter's end at now, so rows
		// dead-lettered after it are not swept into the action confirmed
		// for the rows it counted. Cancel goes back to the page's filter.
		cancel := template.URL("/dlq?" + shown.Query())
		if f.Until.IsZero() {
			f.Until, shown.Until = now, now.UTC().Format(time.RFC3339Nano)
		}
		// The count is the store's; only the rows listed are read (each
		// with its payload), never every row "all matching" selects.
		count, err := c.st.CountDead(r.Context(), f)
		if err != nil {
			c.fail(w, err)
			return
		}
		rows, err := c.st.ListDeadBrief(r.Context(), f, listLimit+1)
		if err != nil {
			c.fail(w, err)
			return
		}
		data := confirmData{Verb: verb, Action: "/dlq/" + verb, Filter: shown, All: all, Count: count, Cancel: cancel}
		if verb == "replay" {
			passed := f
			passed.Passed = true
			if data.Passed, err = c.st.CountDead(r.Context(), passed); err != nil {
				c.fail(w, err)
				return
			}
		}
		for _, id := range f.IDs {
			data.IDs += strconv.FormatInt(id, 10) + ","
		}
		data.IDs = strings.TrimSuffix(data.IDs, ",")
		if len(rows) > listLimit {
			rows, data.Truncated = rows[:listLimit], true
		}
		for _, row := range rows {
			data.Rows = append(data.Rows, viewRow(row))
		}
		c.render(w, r, http.StatusOK, "confirm", data)
		return
	}
	var n int
	if verb == "replay" {
		n, err = c.st.Replay(r.Context(), f, now)
	} else {
		n, err = c.st.Discard(r.Context(), f, now)
	}
	if err != nil {
		c.fail(w, err)
		return
	}
	c.log.Info("console dead-letter "+verb, zap.Int("rows", n), zap.Bool("all", all), zap.String("sink", f.Sink),
		zap.String("kind", f.Kind), zapRole(caller.role), zapRemote(r))
	if caller.csrf == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if verb == "replay" {
			fmt.Fprintf(w, "%d rows queued for delivery again\n", n)
		} else {
			fmt.Fprintf(w, "%d rows discarded\n", n)
		}
		return
	}
	q := shown.Query()
	if q != "" {
		q += "&"
	}
	http.Redirect(w, r, "/dlq?"+q+"done="+verb+"&n="+strconv.Itoa(n), http.StatusSeeOther)
}

// --- sinks ---

type sinkView struct {
	Name                    string
	Configured              bool
	Disabled                bool
	Reason, By              string
	Since                   time.Time
	Pending, Inflight, Dead int
	OldestPending           time.Duration
	// Delivered24h counts the rows delivered in the last 24 hours.
	Delivered24h int
	// Breaker is the sink's circuit breaker in this process: closed,
	// half-open or open; empty when unknown.
	Breaker string
	// Recent are the sink's delivery attempts of the last
	// attemptWindow, by every replica.
	Recent recentAttempts
}

// attemptWindow is how far back the sinks' recent attempts go.
const attemptWindow = time.Hour

// recentAttempts is a sink's attempts of the last attemptWindow.
type recentAttempts struct {
	Attempts int
	// OKPercent is the share answered 2xx, rounded down to a tenth.
	OKPercent string
	// Healthy: every attempt answered 2xx.
	Healthy  bool
	P50, P95 string
}

func viewRecent(a store.AttemptStats) recentAttempts {
	if a.Attempts == 0 {
		return recentAttempts{}
	}
	tenths := a.OK * 1000 / a.Attempts
	return recentAttempts{Attempts: a.Attempts, OKPercent: fmt.Sprintf("%d.%d%%", tenths/10, tenths%10),
		Healthy: a.OK == a.Attempts, P50: latency(a.P50), P95: latency(a.P95)}
}

// latency formats an attempt's latency: 850µs, 42ms, 1.2s.
func latency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// sinkViews joins the configured sinks, the outbox counts, the sink
// states and the recent attempts, by name.
func (c *Console) sinkViews(r *http.Request, act store.Activity, recent []store.AttemptStats) ([]sinkView, error) {
	now := c.cfg.Now()
	stats, err := c.st.Stats(r.Context(), now)
	if err != nil {
		return nil, err
	}
	states, err := c.st.SinkStates(r.Context())
	if err != nil {
		return nil, err
	}
	by := map[string]*sinkView{}
	get := func(name string) *sinkView {
		if v, ok := by[name]; ok {
			return v
		}
		v := &sinkView{Name: name}
		by[name] = v
		return v
	}
	for _, n := range c.cfg.Sinks {
		get(n).Configured = true
	}
	for _, s := range stats {
		v := get(s.Sink)
		v.Pending, v.Inflight, v.Dead, v.OldestPending = s.Pending, s.Inflight, s.Dead, s.OldestPending
	}
	for _, s := range states {
		v := get(s.Sink)
		v.Disabled, v.Reason, v.By, v.Since = s.Disabled, s.Reason, s.By, s.Since
	}
	if c.cfg.Breakers != nil {
		for name, state := range c.cfg.Breakers() {
			get(name).Breaker = state
		}
	}
	for name, n := range act.Delivered {
		get(name).Delivered24h = n
	}
	for _, a := range recent {
		get(a.Sink).Recent = viewRecent(a)
	}
	out := make([]sinkView, 0, len(by))
	for _, v := range by {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b sinkView) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (c *Console) sinks(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Now()
	act, err := c.activity(r.Context(), now.Add(-24*time.Hour), now)
	if err != nil {
		c.fail(w, err)
		return
	}
	recent, err := c.attemptStats(r.Context(), now.Add(-attemptWindow), now)
	if err != nil {
		c.fail(w, err)
		return
	}
	views, err := c.sinkViews(r, act, recent)
	if err != nil {
		c.fail(w, err)
		return
	}
	c.render(w, r, http.StatusOK, "sinks", views)
}

// maxReason bounds an operator's disable reason.
const maxReason = 200

// sinkAct enables or disables a sink the console knows (configured, or
// with rows or a state in the store).
func (c *Console) sinkAct(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	name, verb := r.PathValue("name"), path.Base(r.URL.Path)
	views, err := c.sinkViews(r, store.Activity{}, nil)
	if err != nil {
		c.fail(w, err)
		return
	}
	if !slices.ContainsFunc(views, func(v sinkView) bool { return v.Name == name }) {
		http.Error(w, "no such sink", http.StatusNotFound)
		return
	}
	caller, now := whoOf(r), c.cfg.Now()
	var changed bool
	if verb == "enable" {
		changed, err = c.st.EnableSink(r.Context(), name, now)
	} else {
		reason := strings.ToValidUTF8(strings.TrimSpace(r.PostFormValue("reason")), "\uFFFD")
		if reason == "" {
			reason = "disabled in the console"
		}
		if len(reason) > maxReason {
			// Cut on a character boundary: the store keeps UTF-8.
			n := maxReason
			for n > 0 && !utf8.RuneStart(reason[n]) {
				n--
			}
			reason = reason[:n]
		}
		changed, err = c.st.DisableSink(r.Context(), name, reason, "console "+caller.role.String(), now, now)
	}
	if err != nil {
		c.fail(w, err)
		return
	}
	c.log.Info("console sink "+verb, zap.String("sink", name), zap.Bool("changed", changed), zapRole(caller.role), zapRemote(r))
	if caller.csrf == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "sink %s: %sd (changed: %t)\n", name, verb, changed)
		return
	}
	http.Redirect(w, r, "/sinks", http.StatusSeeOther)
}

// --- overview ---

type sourceView struct {
	Name     string
	LastFile time.Time
	Age      time.Duration
	// Today counts the source's files recorded today (UTC) by status.
	Today map[string]int
	// Leases are the source's directory leases: who polls each.
	Leases []leaseView
	// Polls are its directories' last polls, as their lease holders
	// recorded them; none before the first.
	Polls []pollView
	// ErrorsToday counts its directories' failed polls today (UTC);
	// LastError is the newest failure's message, at LastErrorAt.
	ErrorsToday int
	LastError   string
	LastErrorAt time.Time
	ErrorAge    time.Duration
}

type pollView struct {
	Directory string
	At        time.Time
	Age       time.Duration
	// Stale: older than three poll intervals (when the interval is known).
	Stale bool
	// Failed: the last poll failed.
	Failed bool
}

type leaseView struct {
	Directory, Holder string
	ExpiresAt         time.Time
	Live              bool
}

type overviewData struct {
	Sources   []sourceView
	Sinks     []sinkView
	Dead      int
	Disabled  int
	Divergent bool
	Reasons   []string
	Files     chart
	Delivered chart
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Now()
	last, err := c.st.LastFileTimes(r.Context())
	if err != nil {
		c.fail(w, err)
		return
	}
	names := slices.Clone(c.cfg.Sources)
	for n := range last {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	// The last day's reconciliation, as the divergence gauge computes it,
	// gives the files per source, day and status too.
	rep, err := c.reconciled(r.Context(), now.Add(-24*time.Hour), now, true)
	if err != nil {
		c.fail(w, err)
		return
	}
	leases, err := c.st.LeaseStates(r.Context())
	if err != nil {
		c.fail(w, err)
		return
	}
	polls, err := c.st.PollStatuses(r.Context())
	if err != nil {
		c.fail(w, err)
		return
	}
	for _, p := range polls {
		if !slices.Contains(names, p.Source) {
			names = append(names, p.Source)
		}
	}
	today := now.UTC().Format(time.DateOnly)
	for _, f := range rep.Files {
		if !slices.Contains(names, f.Source) {
			names = append(names, f.Source)
		}
	}
	slices.Sort(names)
	data := overviewData{Divergent: rep.Divergent, Reasons: rep.Reasons}
	for _, n := range names {
		v := sourceView{Name: n, LastFile: last[n], Today: map[string]int{}}
		for _, f := range rep.Files {
			if f.Source == n && f.Day == today {
				v.Today[f.Status] += f.Files
			}
		}
		for _, l := range leases {
			if dir, ok := strings.CutPrefix(l.Name, "poll:"+n+":"); ok {
				v.Leases = append(v.Leases, leaseView{Directory: dir, Holder: l.Holder, ExpiresAt: l.ExpiresAt,
					Live: now.Before(l.ExpiresAt)})
			}
		}
		if !v.LastFile.IsZero() {
			v.Age = now.Sub(v.LastFile)
		}
		c.addPolls(&v, polls, now)
		data.Sources = append(data.Sources, v)
	}
	act, err := c.activity(r.Context(), now.Add(-chartHours*time.Hour), now)
	if err != nil {
		c.fail(w, err)
		return
	}
	data.Files, data.Delivered = hourCharts(act.Hours, now)
	recent, err := c.attemptStats(r.Context(), now.Add(-attemptWindow), now)
	if err != nil {
		c.fail(w, err)
		return
	}
	if data.Sinks, err = c.sinkViews(r, act, recent); err != nil {
		c.fail(w, err)
		return
	}
	for _, s := range data.Sinks {
		data.Dead += s.Dead
		if s.Disabled {
			data.Disabled++
		}
	}
	c.render(w, r, http.StatusOK, "overview", data)
}

// addPolls fills v's poll columns from the recorded polls of its
// directories.
func (c *Console) addPolls(v *sourceView, polls []store.PollStatus, now time.Time) {
	interval := c.cfg.PollIntervals[v.Name]
	for _, p := range polls {
		if p.Source != v.Name {
			continue
		}
		pv := pollView{Directory: p.Directory, At: p.LastPollAt, Age: now.Sub(p.LastPollAt),
			Failed: p.LastErrorAt.Equal(p.LastPollAt) && p.LastError != ""}
		pv.Stale = interval > 0 && pv.Age > 3*interval
		v.Polls = append(v.Polls, pv)
		v.ErrorsToday += p.ErrorsToday(now)
		if p.LastError != "" && p.LastErrorAt.After(v.LastErrorAt) {
			v.LastError, v.LastErrorAt, v.ErrorAge = p.LastError, p.LastErrorAt, now.Sub(p.LastErrorAt)
		}
	}
}
