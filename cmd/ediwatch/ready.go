package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
)

// progress is when one long-running loop (a source's poll loop, the relay)
// last made progress. It is safe for concurrent use.
type progress struct {
	name  string
	stall time.Duration // no progress for longer than this is a stall
	now   func() time.Time
	last  atomic.Int64 // unix nanoseconds
}

// mark records progress now.
func (p *progress) mark() { p.last.Store(p.now().UnixNano()) }

// idle returns how long the loop has made no progress.
func (p *progress) idle() time.Duration { return p.now().Sub(time.Unix(0, p.last.Load())) }

// readiness answers /readyz: ready when the store answers and every loop
// made progress within its threshold. /healthz stays a liveness check: a
// stalled loop is a reason to stop routing to a replica and to alert, and
// its own deadlines (store.ingest_timeout, sink timeouts) end the stall.
type readiness struct {
	now   func() time.Time
	ping  func(context.Context) error
	loops []*progress
}

// loop registers a loop that counts as making progress from now on.
func (r *readiness) loop(name string, stall time.Duration) *progress {
	p := &progress{name: name, stall: stall, now: r.now}
	p.mark()
	r.loops = append(r.loops, p)
	return p
}

func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
	defer cancel()
	if err := r.ping(ctx); errors.Is(err, errStoreReadOnly) {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	} else if err != nil {
		http.Error(w, "store unreachable", http.StatusServiceUnavailable)
		return
	}
	var stalled []string
	for _, p := range r.loops {
		if idle := p.idle(); idle > p.stall {
			stalled = append(stalled, fmt.Sprintf("%s: no progress for %s (threshold %s)",
				p.name, idle.Truncate(time.Second), p.stall))
		}
	}
	if len(stalled) > 0 {
		http.Error(w, strings.Join(stalled, "\n"), http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ready\n")
}

// errStoreReadOnly is /readyz's answer for a store that takes no writes.
var errStoreReadOnly = errors.New("store is read-only (a PostgreSQL standby or default_transaction_read_only, " +
	"or a SQLite database opened read-only): nothing can be committed")

// storePing is /readyz's check of the store: it answers, and it takes
// writes. A DSN that reaches only a standby, or a SQLite database opened
// read-only (with migrate: false, so start-up wrote nothing), answers
// every read and would fail every commit.
func storePing(st store.Store) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, err := st.FileStates(ctx, "readyz", nil); err != nil {
			return err
		}
		ro, ok := st.(interface {
			ReadOnly(context.Context) (bool, error)
		})
		if !ok {
			return nil
		}
		readOnly, err := ro.ReadOnly(ctx)
		if err != nil {
			return err
		}
		if readOnly {
			return errStoreReadOnly
		}
		return nil
	}
}

// pollStall is how long a source's poll loop may go without progress
// before /readyz fails: a poll starts every poll_interval (±10%) and lists
// its directories, and a file's ingest ends within store.ingest_timeout;
// the rest is margin for its download. (The lease it renews every third
// of its TTL while a poll runs is no sign of progress.)
func pollStall(cfg config.Config, s config.Source) time.Duration {
	return max(time.Minute, 3*s.PollInterval.D()+cfg.Store.IngestTimeout.D())
}

// relayStall is the same for the relay: an idle worker claims every
// 500 ms, and a delivery in hand ends within its sink's timeout.
func relayStall(cfg config.Config) time.Duration {
	var longest time.Duration
	for _, s := range cfg.Sinks {
		longest = max(longest, s.Timeout.D())
	}
	return max(time.Minute, 3*longest)
}

// progressStore marks its loop's progress on every successful store call
// that shows a poll loop or the relay moving on: a listing diffed, a file
// committed or recorded, a file post-processed, a lease found held by
// another replica (a standby polls nothing and is ready), rows claimed or
// completed. Taking or renewing a lease is not progress: a poll renews its
// lease while a download hangs. Everything else passes through.
type progressStore struct {
	store.Store
	p *progress
}

func (s progressStore) done(err error) error {
	if err == nil {
		s.p.mark()
	}
	return err
}

func (s progressStore) FileStates(ctx context.Context, source string, paths []string) (map[string]inbox.FileState, error) {
	m, err := s.Store.FileStates(ctx, source, paths)
	return m, s.done(err)
}

func (s progressStore) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (int64, bool, error) {
	tok, ok, err := s.Store.AcquireLease(ctx, name, holder, ttl, now)
	if ok {
		return tok, ok, err
	}
	return tok, ok, s.done(err)
}

func (s progressStore) BeginIngest(ctx context.Context, f inbox.FileInfo) (inbox.Ingestion, error) {
	ing, err := s.Store.BeginIngest(ctx, f)
	if err != nil {
		return nil, err
	}
	return progressIngestion{Ingestion: ing, p: s.p}, nil
}

// progressIngestion marks progress when its ingest commits.
type progressIngestion struct {
	inbox.Ingestion
	p *progress
}

func (i progressIngestion) Commit(ctx context.Context, status inbox.FileStatus, lastError string) (*inbox.IngestResult, error) {
	res, err := i.Ingestion.Commit(ctx, status, lastError)
	if err == nil {
		i.p.mark()
	}
	return res, err
}

func (s progressStore) RecordFileProblem(ctx context.Context, f inbox.FileInfo, status inbox.FileStatus, lastError string) (inbox.FileState, error) {
	st, err := s.Store.RecordFileProblem(ctx, f, status, lastError)
	return st, s.done(err)
}

func (s progressStore) MarkPostDone(ctx context.Context, source, path string, now time.Time) error {
	return s.done(s.Store.MarkPostDone(ctx, source, path, now))
}

func (s progressStore) Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]outbox.Row, error) {
	rows, err := s.Store.Claim(ctx, now, sinks, limit, lease)
	return rows, s.done(err)
}

func (s progressStore) CompleteMany(ctx context.Context, done []outbox.Completion, now time.Time) ([]int64, error) {
	lost, err := s.Store.CompleteMany(ctx, done, now)
	return lost, s.done(err)
}

// progressSink marks the relay's progress whenever a delivery attempt
// returns, whatever its result: a slow sink is not a stalled relay.
type progressSink struct {
	outbox.Deliverer
	p *progress
}

func (d progressSink) Deliver(ctx context.Context, msg sink.Message, now time.Time) sink.Result {
	res := d.Deliverer.Deliver(ctx, msg, now)
	d.p.mark()
	return res
}
