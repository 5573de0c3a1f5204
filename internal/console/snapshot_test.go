package console_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// slowFacts is a store whose reconciliation reads are counted and held
// until released.
type slowFacts struct {
	store.Store
	reads   atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (s *slowFacts) ReconcileCounts(ctx context.Context, since, stuckBefore time.Time) (store.Facts, error) {
	if s.reads.Add(1) == 1 {
		close(s.started)
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return store.Facts{}, ctx.Err()
	}
	return s.Store.ReconcileCounts(ctx, since, stuckBefore)
}

// TestConcurrentViewersShareOneReconciliation: twenty viewers opening
// the overview and the reconcile page at once cost one reconciliation
// read, not twenty, and the viewer whose request started that read may
// leave without failing the others.
func TestConcurrentViewersShareOneReconciliation(t *testing.T) {
	st := &slowFacts{Store: memStore(t), started: make(chan struct{}), release: make(chan struct{})}
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	srv := serve(t, st, func(c *console.Config) {
		c.Now = func() time.Time { return at }
		c.MaxInFlight = 21 // every viewer reads at once
	})
	get := func(ctx context.Context, path string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+viewerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// The first viewer starts the read, then leaves.
	leaving, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := get(leaving, "/"); left <- err }()
	<-st.started
	leave()
	if err := <-left; err == nil {
		t.Fatal("the viewer who left got an answer")
	}
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for i := range 20 {
		path := "/"
		if i%2 == 1 {
			path = "/reconcile"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := get(context.Background(), path)
			if err != nil {
				t.Error(err)
			}
			codes <- code
		}()
	}
	// The viewers are waiting for the held read (without the sharing,
	// each would have started a read of its own by now).
	time.Sleep(300 * time.Millisecond)
	close(st.release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a viewer got %d, want 200", code)
		}
	}
	if n := st.reads.Load(); n != 1 {
		t.Errorf("%d reconciliation reads for 21 viewers, want 1", n)
	}
}

// countedReads is a store whose window aggregates are counted.
type countedReads struct {
	store.Store
	activity, attempts atomic.Int32
}

func (s *countedReads) Activity(ctx context.Context, since time.Time) (store.Activity, error) {
	s.activity.Add(1)
	return s.Store.Activity(ctx, since)
}

func (s *countedReads) AttemptStats(ctx context.Context, since time.Time) ([]store.AttemptStats, error) {
	s.attempts.Add(1)
	return s.Store.AttemptStats(ctx, since)
}

// TestViewersShareTheWindowAggregates: the day's activity and the last
// hour's attempts, the overview's and /sinks' heaviest reads after the
// reconciliation, are read once for every viewer within a snapshot's
// life, as the reconciliation is: twenty viewers of the two pages cost
// one read of each.
func TestViewersShareTheWindowAggregates(t *testing.T) {
	st := &countedReads{Store: memStore(t)}
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	srv := serve(t, st, func(c *console.Config) { c.Now = func() time.Time { return at } })
	for i := range 20 {
		path := "/"
		if i%2 == 1 {
			path = "/sinks"
		}
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+viewerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	if a, b := st.activity.Load(), st.attempts.Load(); a != 1 || b != 1 {
		t.Errorf("20 viewers: %d activity reads and %d attempt reads, want 1 and 1", a, b)
	}
}

// heldActivity is a store whose activity reads, once armed, are counted
// and held until released.
type heldActivity struct {
	store.Store
	armed   atomic.Bool
	reads   atomic.Int32
	release chan struct{}
}

func (s *heldActivity) Activity(ctx context.Context, since time.Time) (store.Activity, error) {
	if s.armed.Load() {
		s.reads.Add(1)
		<-s.release
	}
	return s.Store.Activity(ctx, since)
}

// TestAStaleSnapshotIsServedWhileItIsRead: past its ttl, a snapshot is
// still served at once while one read refreshes it, so a viewer does not
// wait for the refresh; past SnapshotStale a viewer waits for the read.
func TestAStaleSnapshotIsServedWhileItIsRead(t *testing.T) {
	st := &heldActivity{Store: memStore(t), release: make(chan struct{})}
	var now atomic.Int64
	now.Store(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	srv := serve(t, st, func(c *console.Config) {
		c.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
		c.SnapshotTTL, c.SnapshotStale = 2*time.Second, 15*time.Second
	})
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/sinks", nil)
		req.Header.Set("Authorization", "Bearer "+viewerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /sinks: %d", resp.StatusCode)
		}
		return nil
	}
	if err := get(context.Background()); err != nil { // the first read
		t.Fatal(err)
	}
	st.armed.Store(true)
	now.Add(int64(5 * time.Second)) // past the ttl, within stale
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := get(ctx); err != nil {
		t.Fatalf("a stale snapshot was not served while its refresh was held: %v", err)
	}
	// The refresh runs in the background: it reaches the store soon after.
	for deadline := time.Now().Add(5 * time.Second); st.reads.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := st.reads.Load(); n != 1 {
		t.Errorf("%d refreshes started, want 1", n)
	}
	now.Add(int64(20 * time.Second)) // past stale: a viewer waits for the read
	short, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	if err := get(short); err == nil {
		t.Error("a snapshot older than SnapshotStale was served without waiting for its read")
	}
	close(st.release)
}

// concurrentFiles is a store that records how many file lists are read
// at once.
type concurrentFiles struct {
	store.Store
	now, most atomic.Int32
}

func (s *concurrentFiles) ListFiles(ctx context.Context, f inbox.FileFilter, limit int) ([]inbox.FileRow, error) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(100 * time.Millisecond) // long enough for the viewers to overlap
	return s.Store.ListFiles(ctx, f, limit)
}

// TestPagesServedAtOnceAreBounded: no more than MaxInFlight pages are
// served at once, whatever the viewers ask; the others wait their turn
// and are served.
func TestPagesServedAtOnceAreBounded(t *testing.T) {
	st := &concurrentFiles{Store: memStore(t)}
	srv := serve(t, st, func(c *console.Config) { c.MaxInFlight = 2 })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", srv.URL+"/files", nil)
			req.Header.Set("Authorization", "Bearer "+viewerToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET /files: %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if m := st.most.Load(); m != 2 {
		t.Errorf("%d file lists read at once by 8 viewers, want MaxInFlight (2)", m)
	}
}

// heldFiles is a store whose newest-file reads (the overview's first)
// are held until released.
type heldFiles struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (s *heldFiles) LastFileTimes(ctx context.Context) (map[string]time.Time, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.LastFileTimes(ctx)
}

// TestABusyConsoleStillActs: while the one page slot is held, another
// page read waits at most QueryTimeout and is told to retry (503,
// Retry-After), and an action (a sign-out) is served at once.
func TestABusyConsoleStillActs(t *testing.T) {
	st := &heldFiles{Store: memStore(t), entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := serve(t, st, func(c *console.Config) { c.MaxInFlight, c.QueryTimeout = 1, 300*time.Millisecond })
	do := func(method, path string) (*http.Response, error) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+viewerToken)
		return http.DefaultClient.Do(req)
	}
	held := make(chan error, 1)
	go func() {
		resp, err := do("GET", "/")
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	<-st.entered // the overview holds the slot
	resp, err := do("GET", "/dlq")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a page read behind a held slot: %d (Retry-After %q), want 503 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	done := make(chan int, 1)
	go func() {
		resp, err := do("POST", "/signout")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		if code == 0 || code == http.StatusServiceUnavailable {
			t.Errorf("a sign-out while the slot is held: %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("a sign-out waited for the page slot")
	}
	close(st.release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}
