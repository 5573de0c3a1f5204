package poller_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

func newSQLite(t *testing.T) store.Store { return drivertest.SQLite(t) }

type harness struct {
	p   *poller.Poller
	st  store.Store
	m   *metrics.Metrics
	dir string
}

func newHarness(t *testing.T, src poller.Source, dirs []string, mod func(*poller.Config)) *harness {
	return newHarnessOn(t, newSQLite(t), src, dirs, mod)
}

// newHarnessOn is newHarness on st: replicas share one store.
func newHarnessOn(t *testing.T, st store.Store, src poller.Source, dirs []string, mod func(*poller.Config)) *harness {
	m := metrics.New(prometheus.NewRegistry())
	cfg := poller.Config{Name: "acme", Directories: dirs, PollInterval: time.Second, Include: []string{"*.x12", "*.835"},
		RetryBase: time.Nanosecond, RetryMax: time.Nanosecond, SpoolDir: t.TempDir()}
	if mod != nil {
		mod(&cfg)
	}
	p := poller.New(cfg, src, st, inbox.Options{Routes: storetest.Routes}, zap.NewNop(), m)
	return &harness{p: p, st: st, m: m, dir: dirs[0]}
}

func put(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) poll(t *testing.T) poller.Stats {
	t.Helper()
	st, err := h.p.PollOnce(context.Background())
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return st
}

func (h *harness) counts(t *testing.T) store.Counts {
	c, err := h.st.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPollIngestsOnceThenSkips: stable files are taken on the second
// listing, each set is processed once (a copy under another name is a
// duplicate), and a third poll downloads nothing.
func TestPollIngestsOnceThenSkips(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	put(t, dir, "a-copy.x12", storetest.Fixture(t, "835_canonical.x12"))
	put(t, dir, "claims.x12", storetest.Fixture(t, "multi_interchange.x12"))
	put(t, dir, "notes.txt", []byte("not polled: excluded by the globs"))
	h := newHarness(t, local.Source{}, []string{dir}, nil)
	if st := h.poll(t); st.Downloaded != 0 || st.Listed != 3 {
		t.Fatalf("first poll must only observe: %+v", st)
	}
	if st := h.poll(t); st.Downloaded != 3 || st.Ingested != 3 {
		t.Fatalf("second poll: %+v", st)
	}
	if st := h.poll(t); st.Downloaded != 0 || st.Skipped != 3 {
		t.Fatalf("third poll downloaded again: %+v", st)
	}
	c := h.counts(t)
	// claims.x12 opens with the same set as a.835, then two sets of the
	// same payment under other keys.
	if c.Inbox["processed"] != 3 || c.Sightings["duplicate"] != 2 || c.Sightings["business_duplicate"] != 2 ||
		c.Outbox["pending"] != 3 || c.Files["ingested"] != 3 {
		t.Errorf("counts %+v", c)
	}
	if got := testutil.ToFloat64(h.m.FilesSkipped.WithLabelValues("acme", "final")); got != 3 {
		t.Errorf("skipped final = %v", got)
	}
}

// TestGrowingFileIsIngestedOnceComplete: a file appended between polls is
// left until its size and mtime hold still, then ingested whole.
func TestGrowingFileIsIngestedOnceComplete(t *testing.T) {
	dir := t.TempDir()
	full := storetest.Fixture(t, "835_canonical.x12")
	put(t, dir, "a.835", full[:200])
	h := newHarness(t, local.Source{}, []string{dir}, nil)
	h.poll(t)
	f, _ := os.OpenFile(filepath.Join(dir, "a.835"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write(full[200:400])
	f.Close()
	if st := h.poll(t); st.Downloaded != 0 {
		t.Fatalf("took a growing file: %+v", st)
	}
	f, _ = os.OpenFile(filepath.Join(dir, "a.835"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write(full[400:])
	f.Close()
	h.poll(t)
	if st := h.poll(t); st.Ingested != 1 {
		t.Fatalf("complete file not taken: %+v", st)
	}
	c := h.counts(t)
	if c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 || c.Outbox["pending"] != 2 {
		t.Errorf("counts %+v: ingested once, complete", c)
	}
}

func TestStableForWaits(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) { c.StableFor = time.Hour })
	h.poll(t)
	if st := h.poll(t); st.Downloaded != 0 {
		t.Fatalf("took a file younger than stable_for: %+v", st)
	}
}

func TestDeleteAndMoveAfterCommit(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) { c.After = "delete" })
	h.poll(t)
	if st := h.poll(t); st.Ingested != 1 || st.PostProcessed != 1 {
		t.Fatalf("delete: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.835")); !errors.Is(err, os.ErrNotExist) {
		t.Error("file not deleted")
	}

	dir2 := t.TempDir()
	archive := filepath.Join(dir2, "archive")
	os.MkdirAll(archive, 0o755)
	put(t, archive, "b.835", []byte("an older file of the same name"))
	put(t, dir2, "b.835", storetest.Fixture(t, "835_regenerated.x12"))
	h2 := newHarness(t, local.Source{}, []string{dir2}, func(c *poller.Config) { c.After = "move:" + archive })
	h2.poll(t)
	if st := h2.poll(t); st.PostProcessed != 1 {
		t.Fatalf("move: %+v", st)
	}
	names, _ := filepath.Glob(filepath.Join(archive, "b.835*"))
	if len(names) != 2 {
		t.Errorf("archive holds %v: the moved file needs a unique suffix", names)
	}
	if b, _ := os.ReadFile(filepath.Join(archive, "b.835")); string(b) != "an older file of the same name" {
		t.Error("the older archived file was overwritten")
	}
}

// flaky wraps a source with scripted faults.
type flaky struct {
	poller.Source
	failOpen   atomic.Int32 // fail this many opens
	failRemove atomic.Int32
	cutAfter   atomic.Int64 // cut reads after this many bytes (once)
	opens      atomic.Int32
}

func (f *flaky) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	f.opens.Add(1)
	if f.failOpen.Add(-1) >= 0 {
		return nil, errors.New("connection reset by peer")
	}
	rc, err := f.Source.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	if n := f.cutAfter.Swap(0); n > 0 {
		return &cut{r: io.LimitReader(rc, n), c: rc}, nil
	}
	return rc, nil
}

type cut struct {
	r io.Reader
	c io.Closer
}

func (c *cut) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection lost")
	}
	return n, err
}
func (c *cut) Close() error { return c.c.Close() }

func (f *flaky) Remove(ctx context.Context, p string) error {
	if f.failRemove.Add(-1) >= 0 {
		return errors.New("permission denied by the partner's server")
	}
	return f.Source.Remove(ctx, p)
}

// TestDroppedDownloadIngestsNothing: a download cut off halfway records
// nothing but a retry, and the next poll ingests the whole file once.
func TestDroppedDownloadIngestsNothing(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	src := &flaky{Source: local.Source{}}
	src.cutAfter.Store(300)
	h := newHarness(t, src, []string{dir}, nil)
	h.poll(t)
	if st := h.poll(t); st.Failed != 1 || st.Ingested != 0 {
		t.Fatalf("cut download: %+v", st)
	}
	if c := h.counts(t); c.Inbox["processed"]+c.Inbox["rejected"] != 0 || c.Files["retrying"] != 1 {
		t.Fatalf("a cut download left %+v", c)
	}
	if st := h.poll(t); st.Ingested != 1 {
		t.Fatalf("retry: %+v", st)
	}
	if c := h.counts(t); c.Inbox["processed"] != 1 || c.Files["ingested"] != 1 {
		t.Errorf("after retry: %+v", c)
	}
}

func TestRepeatedFailuresGiveUp(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	src := &flaky{Source: local.Source{}}
	src.failOpen.Store(100)
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) { c.MaxAttempts = 3 })
	for range 6 {
		h.poll(t)
	}
	if n := src.opens.Load(); n != 3 {
		t.Errorf("%d download attempts, want 3", n)
	}
	states, _ := h.st.FileStates(context.Background(), "acme", []string{filepath.Join(dir, "a.835")})
	st := states[filepath.Join(dir, "a.835")]
	if st.Status != inbox.FileFailed || st.Attempts != 3 || !strings.Contains(st.LastError, "connection reset") {
		t.Errorf("ledger %+v", st)
	}
	if got := testutil.ToFloat64(h.m.FilesFailed.WithLabelValues("acme", "gave_up")); got != 1 {
		t.Errorf("gave_up = %v", got)
	}
}

// TestFailedPostProcessingIsRetriedWithoutReprocessing: a delete that
// fails is retried on the next poll; the file is not ingested again.
func TestFailedPostProcessingIsRetriedWithoutReprocessing(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	src := &flaky{Source: local.Source{}}
	src.failRemove.Store(1)
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) { c.After = "delete" })
	h.poll(t)
	if st := h.poll(t); st.Ingested != 1 || st.PostProcessed != 0 {
		t.Fatalf("%+v", st)
	}
	if st := h.poll(t); st.Downloaded != 0 || st.PostProcessed != 1 {
		t.Fatalf("retry of the delete: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.835")); !errors.Is(err, os.ErrNotExist) {
		t.Error("not deleted on retry")
	}
	if c := h.counts(t); c.Sightings["duplicate"] != 0 || c.Inbox["processed"] != 1 {
		t.Errorf("reprocessed: %+v", c)
	}
}

// TestMissingDirectoryDoesNotStopOthers: a directory that disappears is an
// error counted for it; the other directories are still polled.
func TestMissingDirectoryDoesNotStopOthers(t *testing.T) {
	gone, ok := t.TempDir(), t.TempDir()
	put(t, ok, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	h := newHarness(t, local.Source{}, []string{gone, ok}, nil)
	os.RemoveAll(gone)
	h.p.PollOnce(context.Background())
	st, err := h.p.PollOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), gone) {
		t.Errorf("err = %v", err)
	}
	if st.Ingested != 1 {
		t.Errorf("the other directory was not polled: %+v", st)
	}
	if got := testutil.ToFloat64(h.m.PollErrors.WithLabelValues("acme", "list")); got != 2 {
		t.Errorf("list errors = %v", got)
	}
}

func TestTooLargeIsRejectedWithoutDownload(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "big.835", storetest.Fixture(t, "835_canonical.x12"))
	src := &flaky{Source: local.Source{}}
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) { c.MaxFileSize = 100 })
	h.poll(t)
	h.poll(t)
	if src.opens.Load() != 0 {
		t.Error("a file over max_file_size was downloaded")
	}
	states, _ := h.st.FileStates(context.Background(), "acme", []string{filepath.Join(dir, "big.835")})
	if st := states[filepath.Join(dir, "big.835")]; st.Status != inbox.FileRejected || !strings.Contains(st.LastError, "max_file_size") {
		t.Errorf("ledger %+v", st)
	}
}

// TestSpoolFilesNeverLinger: the spool directory is empty after polls,
// including one whose download failed.
func TestSpoolFilesNeverLinger(t *testing.T) {
	dir, spool := t.TempDir(), t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	put(t, dir, "b.835", storetest.Fixture(t, "835_regenerated.x12"))
	src := &flaky{Source: local.Source{}}
	src.cutAfter.Store(100)
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) { c.SpoolDir = spool })
	h.poll(t)
	h.poll(t)
	h.poll(t)
	if names, _ := os.ReadDir(spool); len(names) != 0 {
		t.Errorf("spool holds %d files", len(names))
	}
}

// vanishing deletes a file just before it is opened: deleted between the
// listing and the download.
type vanishing struct{ poller.Source }

func (v vanishing) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	os.Remove(p)
	return v.Source.Open(ctx, p)
}

func TestFileDeletedBetweenListingAndDownload(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	h := newHarness(t, vanishing{local.Source{}}, []string{dir}, nil)
	h.poll(t)
	if st := h.poll(t); st.Failed != 0 || st.Skipped != 1 || st.Ingested != 0 {
		t.Fatalf("%+v", st)
	}
	if got := testutil.ToFloat64(h.m.FilesSkipped.WithLabelValues("acme", "vanished")); got != 1 {
		t.Errorf("vanished = %v", got)
	}
	if c := h.counts(t); len(c.Files) != 0 {
		t.Errorf("a vanished file was recorded: %+v", c.Files)
	}
}

// TestCleanStopReleasesLeases: a poller that stops cleanly gives up its
// directory lease, so another replica polls at once instead of after the
// lease TTL.
func TestCleanStopReleasesLeases(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) {
		c.Holder, c.LeaseTTL, c.PollInterval = "first", time.Hour, 10*time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.p.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	lease := "poll:acme:" + dir
	if _, ok, _ := h.st.AcquireLease(context.Background(), lease, "second", time.Minute, time.Now().UTC()); ok {
		t.Fatal("the running poller's lease was free")
	}
	cancel()
	<-done
	if _, ok, _ := h.st.AcquireLease(context.Background(), lease, "second", time.Minute, time.Now().UTC()); !ok {
		t.Error("the lease was not released on a clean stop")
	}
}

// TestMinAgeFollowsTheInjectedClock: the poller reads time from its clock,
// so moving the clock ages a file past min_age without waiting.
func TestMinAgeFollowsTheInjectedClock(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) { c.MinAge = time.Hour })
	now := time.Now().UTC()
	h.p.SetClock(func() time.Time { return now })
	h.poll(t)
	if st := h.poll(t); st.Downloaded != 0 {
		t.Fatalf("took a file younger than min_age: %+v", st)
	}
	now = now.Add(2 * time.Hour)
	if st := h.poll(t); st.Ingested != 1 {
		t.Errorf("a file aged past min_age by the clock: %+v", st)
	}
}
