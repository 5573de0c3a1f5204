// Package console is the operator console served by `ediwatch run`: server
// rendered pages over the store (dead letters, sinks, an overview) for
// people who sign in with a token, and the same routes for scripts that
// send it as a bearer token.
//
// Viewers read; admins also replay and discard dead rows and enable and
// disable sinks. No page shows patient data: payloads and receivers'
// responses are never rendered, and effect keys that may name a patient
// are shown digested (sink.LogKey).
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/secretfile"
	"github.com/ediwatch/ediwatch/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the console reads and changes; store.Store provides it.
type Store interface {
	ListDead(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error)
	ListDeadBrief(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error)
	CountDead(ctx context.Context, f outbox.DeadFilter) (int, error)
	GetOutbox(ctx context.Context, id int64) (outbox.Row, error)
	Replay(ctx context.Context, f outbox.DeadFilter, now time.Time) (int, error)
	Discard(ctx context.Context, f outbox.DeadFilter, now time.Time) (int, error)
	Stats(ctx context.Context, now time.Time) ([]outbox.SinkStats, error)
	Attempts(ctx context.Context, id int64) ([]outbox.Attempt, error)
	SinkStates(ctx context.Context) ([]outbox.SinkState, error)
	DisableSink(ctx context.Context, sink, reason, by string, now, sent time.Time) (bool, error)
	EnableSink(ctx context.Context, sink string, now time.Time) (bool, error)
	LastFileTimes(ctx context.Context) (map[string]time.Time, error)
	store.Reconciler
	store.ActivityReader
	store.LeaseReader
	store.ConsoleReader
	store.SessionRevoker
	inbox.FileBrowser
}

// Config configures a Console.
type Config struct {
	// ViewerToken may read every page; AdminToken may also act. Both are
	// compared in constant time and never logged. AdminToken may be empty
	// (no admins).
	ViewerToken, AdminToken string
	// Sources and Sinks are the configured names, shown even before the
	// store holds anything of theirs.
	Sources, Sinks []string
	// PollIntervals are the sources' poll intervals: a directory whose
	// last poll is older than three of them is shown as stale.
	PollIntervals map[string]time.Duration
	// Breakers, when set, returns each sink's circuit breaker state in
	// this process (outbox.Relay.BreakerStates).
	Breakers func() map[string]string
	// Secure marks session cookies Secure (the console serves HTTPS).
	Secure bool
	// SessionTTL bounds a signed-in session (default 12h).
	SessionTTL time.Duration
	// SignInRate and SignInBurst bound sign-in attempts (and requests with
	// a wrong bearer token) per remote address (default 1 every 6s, burst
	// 5).
	SignInRate  rate.Limit
	SignInBurst int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// SnapshotTTL is how long one reading of the heavy aggregates (the
	// day's reconciliation, activity and attempts) serves every viewer
	// (default 2s), and SnapshotStale how long it is still served while
	// one read refreshes it (default 15s).
	SnapshotTTL, SnapshotStale time.Duration
	// MaxInFlight bounds the page reads served at once (default half the
	// processors, at least one); the others wait their turn (at most
	// QueryTimeout, then 503 with Retry-After), so viewers cannot take the
	// processors from ingest and the relay. Actions take no turn.
	MaxInFlight int
	// QueryTimeout bounds each of those readings, and every page's reads
	// (default 10s).
	QueryTimeout time.Duration
}

// Console is the console's http.Handler. It is safe for concurrent use.
type Console struct {
	cfg   Config
	st    Store
	log   *zap.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux

	// keys sign each role's session cookies.
	keys map[role][]byte

	// snap shares the heavy reads between concurrent viewers.
	snap *snapshots
	// inFlight holds a token for each page being served (MaxInFlight).
	inFlight chan struct{}

	mu       sync.Mutex
	limiters map[string]*limiter
}

// New returns a console over st. log never receives a token.
func New(cfg Config, st Store, log *zap.Logger) (*Console, error) {
	if cfg.ViewerToken == "" {
		return nil, errors.New("console: the viewer token is empty")
	}
	if cfg.AdminToken == cfg.ViewerToken {
		return nil, errors.New("console: the viewer and admin tokens are the same")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.SignInRate == 0 {
		cfg.SignInRate = rate.Every(6 * time.Second)
	}
	if cfg.SignInBurst <= 0 {
		cfg.SignInBurst = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SnapshotTTL <= 0 {
		cfg.SnapshotTTL = 2 * time.Second
	}
	if cfg.SnapshotStale < cfg.SnapshotTTL {
		cfg.SnapshotStale = max(15*time.Second, cfg.SnapshotTTL)
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 10 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = max(1, runtime.GOMAXPROCS(0)/2)
	}
	c := &Console{cfg: cfg, st: st, log: log, keys: sessionKeys(cfg.ViewerToken, cfg.AdminToken), limiters: map[string]*limiter{},
		snap:     &snapshots{ttl: cfg.SnapshotTTL, stale: cfg.SnapshotStale, timeout: cfg.QueryTimeout, now: cfg.Now},
		inFlight: make(chan struct{}, cfg.MaxInFlight)}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

// ReadToken reads a token file: its content with surrounding whitespace
// trimmed, which must not be empty. Errors never show the token, nor the
// path of a file that cannot be read (secretfile.Read).
func ReadToken(path string) (string, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s: empty", path)
	}
	return tok, nil
}

// CheckListen refuses plain HTTP on an address other than loopback unless
// allowInsecure: tokens and session cookies would cross the network in
// clear.
func CheckListen(addr string, tls, allowInsecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("console.listen: %w", err)
	}
	if tls || allowInsecure {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	// localhost is loopback only if every address it names is: a hosts
	// file or resolver can point it elsewhere.
	if strings.EqualFold(host, "localhost") {
		if ips, err := lookupIP(host); err == nil && len(ips) > 0 &&
			!slices.ContainsFunc(ips, func(ip net.IP) bool { return !ip.IsLoopback() }) {
			return nil
		}
	}
	return fmt.Errorf("console.listen: %q is not a loopback address: set console.tls_cert_file and console.tls_key_file, or console.allow_insecure: true", addr)
}

// lookupIP resolves a host name for CheckListen; tests replace it.
var lookupIP = net.LookupIP

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	// Files only, no directory listing: /static/ needs no session.
	m.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	}))
	m.HandleFunc("GET /signin", c.signInPage)
	m.HandleFunc("POST /signin", c.signIn)
	m.Handle("POST /signout", c.auth(roleViewer, c.signOut))
	m.Handle("GET /{$}", c.auth(roleViewer, c.overview))
	m.Handle("GET /dlq", c.auth(roleViewer, c.dlq))
	m.Handle("GET /dlq/{id}", c.auth(roleViewer, c.dlqRow))
	m.Handle("POST /dlq/replay", c.auth(roleAdmin, c.dlqAct))
	m.Handle("POST /dlq/discard", c.auth(roleAdmin, c.dlqAct))
	m.Handle("GET /sinks", c.auth(roleViewer, c.sinks))
	m.Handle("GET /reconcile", c.auth(roleViewer, c.reconcileReport))
	m.Handle("GET /files", c.auth(roleViewer, c.files))
	m.Handle("GET /files/{id}", c.auth(roleViewer, c.file))
	m.Handle("POST /sinks/{name}/enable", c.auth(roleAdmin, c.sinkAct))
	m.Handle("POST /sinks/{name}/disable", c.auth(roleAdmin, c.sinkAct))
	c.mux = m
}

// maxForm bounds a posted form.
const maxForm = 1 << 20

// ServeHTTP sets the strict headers on every response, refuses
// cross-site state changes, and routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if c.cfg.Secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if crossSite(r) {
			http.Error(w, "cross-site request refused", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	} else {
		// A page's reads end with its viewer (the request's context) or
		// at QueryTimeout, whichever is first: a store slow to answer
		// does not pile up queries behind viewers who left. An action
		// (a replay of many rows) is bounded by its viewer alone.
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.QueryTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	c.mux.ServeHTTP(w, r)
}

// crossSite reports whether a browser says r comes from another site.
// Sec-Fetch-Site, which page scripts cannot set, decides when present:
// only same-origin (or none, the user's own navigation) passes. Without
// it (older browsers) the Origin must name the request's host. Browsers
// send "Origin: null" on a same-origin form post from a page whose
// Referrer-Policy is no-referrer, as the console's are, so Origin alone
// cannot decide for those that send Sec-Fetch-Site. Requests with neither
// header (scripts) are not cross-site.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	_, host, ok := strings.Cut(origin, "://")
	return !ok || !strings.EqualFold(host, r.Host)
}
