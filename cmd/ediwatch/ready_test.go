package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func readyzStatus(t *testing.T, r http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// TestReadyzFailsWhenALoopStalls: /readyz is 200 while every loop makes
// progress within its threshold, and 503 naming the loop once one has made
// none for longer.
func TestReadyzFailsWhenALoopStalls(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)}
	r := &readiness{now: clk.now, ping: func(context.Context) error { return nil }}
	poll := r.loop("poll loop acme", 3*time.Minute)
	rel := r.loop("relay", time.Minute)
	if code, body := readyzStatus(t, r); code != 200 {
		t.Fatalf("at start: %d %s", code, body)
	}
	clk.advance(50 * time.Second)
	rel.mark()
	clk.advance(50 * time.Second)
	rel.mark()
	if code, body := readyzStatus(t, r); code != 200 {
		t.Fatalf("both within threshold: %d %s", code, body)
	}
	clk.advance(81 * time.Second) // poll: 3m1s without progress
	rel.mark()
	code, body := readyzStatus(t, r)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "poll loop acme") || strings.Contains(body, "relay") {
		t.Fatalf("stalled poll loop: %d %q", code, body)
	}
	poll.mark()
	clk.advance(61 * time.Second)
	poll.mark()
	code, body = readyzStatus(t, r)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "relay") {
		t.Fatalf("stalled relay: %d %q", code, body)
	}
	rel.mark()
	if code, body := readyzStatus(t, r); code != 200 {
		t.Fatalf("recovered: %d %s", code, body)
	}
}

func TestReadyzFailsWhenStoreUnreachable(t *testing.T) {
	r := &readiness{now: time.Now, ping: func(context.Context) error { return errors.New("connection refused") }}
	r.loop("relay", time.Minute)
	if code, _ := readyzStatus(t, r); code != http.StatusServiceUnavailable {
		t.Fatalf("status %d", code)
	}
}

type nopSink struct{}

func (nopSink) Deliver(context.Context, sink.Message, time.Time) sink.Result { return sink.Result{} }

// TestLoopsMarkProgressThroughTheStore: the store calls a poll loop and the
// relay make in their stride (a lease found held by another replica among
// them), and every delivery attempt, count as progress; a failed call
// does not, nor does taking or renewing a lease.
func TestLoopsMarkProgressThroughTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)}
	r := &readiness{now: clk.now}
	p := r.loop("x", time.Minute)
	ps := progressStore{Store: st, p: p}
	if _, ok, err := st.AcquireLease(ctx, "poll:s:/in", "other", 1000*time.Hour, clk.now()); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	calls := map[string]func() error{
		"FileStates": func() error { _, err := ps.FileStates(ctx, "s", []string{"a"}); return err },
		"AcquireLease held by another replica": func() error {
			_, ok, err := ps.AcquireLease(ctx, "poll:s:/in", "h", time.Minute, clk.now())
			if ok {
				t.Fatal("the lease held by another replica was taken")
			}
			return err
		},
		"Commit": func() error {
			ing, err := ps.BeginIngest(ctx, inbox.FileInfo{Source: "s", Path: "c", Size: 1, MTime: clk.now(),
				SHA256: "00", CorrelationID: "corr", Now: clk.now()})
			if err != nil {
				return err
			}
			defer ing.Rollback()
			_, err = ing.Commit(ctx, inbox.FileRejected, "not x12")
			return err
		},
		"MarkPostDone": func() error { return ps.MarkPostDone(ctx, "s", "a", clk.now()) },
		"RecordFileProblem": func() error {
			_, err := ps.RecordFileProblem(ctx, inbox.FileInfo{Source: "s", Path: "b", Now: clk.now()}, inbox.FileRetrying, "x")
			return err
		},
		"Claim": func() error { _, err := ps.Claim(ctx, clk.now(), nil, 1, time.Minute); return err },
		"CompleteMany": func() error {
			_, err := ps.CompleteMany(ctx, []outbox.Completion{{ID: 1, Token: "t"}}, clk.now())
			return err
		},
		"Deliver": func() error {
			progressSink{Deliverer: nopSink{}, p: p}.Deliver(ctx, sink.Message{}, clk.now())
			return nil
		},
	}
	for name, call := range calls {
		clk.advance(time.Hour)
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if idle := p.idle(); idle != 0 {
			t.Errorf("%s did not mark progress (idle %s)", name, idle)
		}
	}
	clk.advance(time.Hour)
	for range 2 { // taken, then renewed
		if _, ok, err := ps.AcquireLease(ctx, "poll:s:/mine", "h", time.Minute, clk.now()); err != nil || !ok {
			t.Fatalf("lease: %v %v", ok, err)
		}
	}
	if p.idle() != time.Hour {
		t.Errorf("taking or renewing a lease marked progress")
	}
	clk.advance(time.Hour)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ps.FileStates(cancelled, "s", []string{"a"}); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	if p.idle() != 2*time.Hour {
		t.Errorf("a failed call marked progress")
	}
}

// TestStallThresholdsFollowIntervals: the thresholds grow with the poll
// interval, the ingest deadline and the slowest sink, never under a minute.
func TestStallThresholdsFollowIntervals(t *testing.T) {
	cfg := config.Default()
	cfg.Store.IngestTimeout = config.Duration(10 * time.Minute)
	cfg.Sinks = map[string]config.Sink{"a": {Timeout: config.Duration(5 * time.Second)},
		"b": {Timeout: config.Duration(40 * time.Second)}}
	if got := pollStall(cfg, config.Source{PollInterval: config.Duration(time.Minute)}); got != 13*time.Minute {
		t.Errorf("poll stall %s", got)
	}
	if got := relayStall(cfg); got != 2*time.Minute {
		t.Errorf("relay stall %s", got)
	}
	cfg.Sinks = nil
	if got := relayStall(cfg); got != time.Minute {
		t.Errorf("relay stall without sinks %s", got)
	}
}

// leaseCounter tells when a lease call has returned.
type leaseCounter struct {
	store.Store
	renewed chan struct{}
}

func (s leaseCounter) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (int64, bool, error) {
	tok, ok, err := s.Store.AcquireLease(ctx, name, holder, ttl, now)
	select {
	case s.renewed <- struct{}{}:
	default:
	}
	return tok, ok, err
}

// hangingSource is a drop whose downloads hang until their context ends,
// as on a server that stopped answering.
type hangingSource struct {
	poller.Source
	opened chan struct{}
}

func (h hangingSource) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	close(h.opened)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestReadyzFailsWhileAPollHangsInADownload: a poll stuck in a download
// keeps renewing its directory lease; /readyz still turns 503 once the
// poll loop has made no progress for longer than its threshold.
func TestReadyzFailsWhileAPollHangsInADownload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)}
	r := &readiness{now: clk.now, ping: func(context.Context) error { return nil }}
	loop := r.loop("poll loop acme", 3*time.Minute)
	drop := t.TempDir()
	if err := os.WriteFile(filepath.Join(drop, "era.835"), []byte("ISA*"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := hangingSource{Source: local.Source{}, opened: make(chan struct{})}
	counted := leaseCounter{Store: progressStore{Store: st, p: loop}, renewed: make(chan struct{})}
	p := poller.New(poller.Config{Name: "acme", Directories: []string{drop}, PollInterval: time.Second,
		LeaseTTL: 300 * time.Millisecond, SpoolDir: t.TempDir()}, src, counted, inbox.Options{Routes: storetest.Routes},
		zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	if _, err := p.PollOnce(ctx); err != nil { // first listing: not stable yet
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Poll until one begins the download (it then hangs until
		// cancel): on a loaded machine a poll may fail first, e.g. on a
		// busy store, and return without opening the file.
		for ctx.Err() == nil {
			p.PollOnce(ctx)
			select {
			case <-src.opened:
				return
			default:
			}
		}
	}()
	select {
	case <-src.opened:
	case <-time.After(2 * time.Minute): // a hang guard, not a timing assertion
		t.Fatal("no poll began the download")
	}
	if code, body := readyzStatus(t, r); code != 200 {
		t.Fatalf("a download just begun: %d %s", code, body)
	}
	clk.advance(3*time.Minute + time.Second)
	for i := range 3 { // the poll renews its lease while the download hangs
		select {
		case <-counted.renewed:
		case <-done:
			t.Fatalf("the poll ended after %d renewals; it should hang in its download until cancelled", i)
		case <-time.After(2 * time.Minute): // a hang guard, not a timing assertion
			t.Fatalf("%d renewals of the lease while the download hangs, want 3", i)
		}
	}
	code, body := readyzStatus(t, r)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "poll loop acme") {
		t.Errorf("a poll hung in a download, its lease renewed: %d %q", code, body)
	}
	cancel()
	<-done
}
