package poller_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// steal makes another replica take the directory lease: the holder's
// lease lapses (as when it stalls past its TTL) and "thief" acquires it.
func steal(t *testing.T, st store.Store, lease string) {
	t.Helper()
	ctx := context.Background()
	if _, ok, err := st.AcquireLease(ctx, lease, "first", -time.Hour, time.Now().UTC()); err != nil || !ok {
		t.Fatalf("lapse: %v %v", ok, err)
	}
	if _, ok, err := st.AcquireLease(ctx, lease, "thief", time.Hour, time.Now().UTC()); err != nil || !ok {
		t.Fatalf("takeover: %v %v", ok, err)
	}
}

// onOpen runs a hook when a download starts.
type onOpen struct {
	poller.Source
	hook func()
}

func (o *onOpen) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	o.hook()
	return o.Source.Open(ctx, p)
}

// TestReplicaThatLostItsLeaseCannotCommit: the lease passes to another
// replica while a file downloads; the ingest commits nothing and the file
// is not deleted; the new holder ingests and deletes it.
func TestReplicaThatLostItsLeaseCannotCommit(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	src := &onOpen{Source: local.Source{}}
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) { c.Holder, c.After, c.LeaseTTL = "first", "delete", time.Hour })
	lease := "poll:acme:" + dir
	src.hook = func() { steal(t, h.st, lease) }
	h.p.PollOnce(context.Background())
	h.p.PollOnce(context.Background())
	if c := h.counts(t); len(c.Files)+len(c.Inbox)+len(c.Outbox) != 0 {
		t.Fatalf("a replica without its lease committed %+v", c)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "a.835*"))
	if len(left) != 1 {
		t.Fatalf("drop holds %v", left)
	}
	thief := newHarnessOn(t, h.st, local.Source{}, []string{dir}, func(c *poller.Config) { c.Holder, c.After = "thief", "delete" })
	thief.poll(t)
	thief.poll(t)
	if c := h.counts(t); c.Inbox["processed"] != 1 || c.Files["ingested"] != 1 {
		t.Errorf("the new holder: %+v", c)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("drop holds %v", left)
	}
}

// fencedAfterCommit wraps a store: the lease passes to another replica
// right after an ingest commits, before post-processing.
type fencedAfterCommit struct {
	store.Store
	after func()
}

func (f *fencedAfterCommit) BeginIngest(ctx context.Context, fi inbox.FileInfo) (inbox.Ingestion, error) {
	in, err := f.Store.BeginIngest(ctx, fi)
	return &commitHook{Ingestion: in, after: f.after}, err
}

type commitHook struct {
	inbox.Ingestion
	after func()
}

func (c *commitHook) Commit(ctx context.Context, status inbox.FileStatus, lastError string) (*inbox.IngestResult, error) {
	r, err := c.Ingestion.Commit(ctx, status, lastError)
	if err == nil {
		c.after()
	}
	return r, err
}

// TestReplicaThatLostItsLeaseCannotPostProcess: the lease passes to
// another replica between the commit and the delete; the file is not
// deleted by the old holder, and the new holder finishes its
// post-processing without ingesting it again.
func TestReplicaThatLostItsLeaseCannotPostProcess(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	st := newSQLite(t)
	lease := "poll:acme:" + dir
	wrapped := &fencedAfterCommit{Store: st, after: func() { steal(t, st, lease) }}
	h := newHarnessOn(t, wrapped, local.Source{}, []string{dir}, func(c *poller.Config) {
		c.Holder, c.After, c.LeaseTTL = "first", "delete", time.Hour
	})
	h.p.PollOnce(context.Background())
	if s, _ := h.p.PollOnce(context.Background()); s.Ingested != 1 || s.PostProcessed != 0 {
		t.Fatalf("%+v", s)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "a.835*")); len(left) != 1 {
		t.Fatalf("the old holder post-processed without its lease: drop holds %v", left)
	}
	thief := newHarnessOn(t, st, local.Source{}, []string{dir}, func(c *poller.Config) { c.Holder, c.After = "thief", "delete" })
	if s := thief.poll(t); s.PostProcessed != 1 || s.Downloaded != 0 {
		t.Errorf("the new holder: %+v", s)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("drop holds %v", left)
	}
}

// stalling runs a hook when a download starts, then blocks it until its
// context ends.
type stalling struct {
	poller.Source
	hook func()
}

func (s *stalling) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	s.hook()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestLostLeaseStopsThePoll: when a renewal finds the lease taken, the
// poll stops: downloads in progress are abandoned, nothing is recorded,
// and the poll reports the lost lease.
func TestLostLeaseStopsThePoll(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	src := &stalling{Source: local.Source{}}
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) {
		c.Holder, c.LeaseTTL = "first", 30*time.Millisecond
	})
	h.p.PollOnce(context.Background())
	lease := "poll:acme:" + dir
	src.hook = func() {
		// The lease lapses while the download stalls (it never returns on
		// its own); another replica may take it.
		h.st.AcquireLease(context.Background(), lease, "first", -time.Hour, time.Now().UTC())
		h.st.AcquireLease(context.Background(), lease, "thief", time.Hour, time.Now().UTC())
	}
	_, err := h.p.PollOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "lease lost") {
		t.Errorf("poll: %v, want the lost lease", err)
	}
	if c := h.counts(t); len(c.Files) != 0 {
		t.Errorf("recorded %+v", c.Files)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.835")); errors.Is(err, os.ErrNotExist) {
		t.Error("the file is gone")
	}
}

// failingOpen runs a hook when a download starts, then fails it.
type failingOpen struct {
	poller.Source
	hook func()
}

func (f *failingOpen) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	f.hook()
	return nil, errors.New("connection lost")
}

// TestReplicaThatLostItsLeaseRecordsNoFailure: the lease passes to
// another replica while a download is under way, before the old holder
// notices; the new holder ingests the file; then the old holder's download
// fails. The failure is the old holder's alone: it does not overwrite the
// new holder's ledger row (the file would be taken again, as a duplicate).
func TestReplicaThatLostItsLeaseRecordsNoFailure(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	src := &failingOpen{Source: local.Source{}}
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) { c.Holder, c.LeaseTTL = "first", time.Hour })
	thief := newHarnessOn(t, h.st, local.Source{}, []string{dir}, func(c *poller.Config) { c.Holder = "thief" })
	lease := "poll:acme:" + dir
	src.hook = func() {
		steal(t, h.st, lease)
		thief.poll(t)
		thief.poll(t)
	}
	h.p.PollOnce(context.Background())
	h.p.PollOnce(context.Background())
	states, err := h.st.FileStates(context.Background(), "acme", []string{filepath.Join(dir, "a.835")})
	if err != nil {
		t.Fatal(err)
	}
	if s := states[filepath.Join(dir, "a.835")]; s.Status != inbox.FileIngested {
		t.Errorf("ledger row %+v, want the new holder's ingested row", s)
	}
	if s := thief.poll(t); s.Downloaded != 0 {
		t.Errorf("the new holder took the file again: %+v", s)
	}
	if c := h.counts(t); c.Sightings["duplicate"] != 0 {
		t.Errorf("counts %+v", c)
	}
}
