package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// allArrive holds every caller of NextControlNumber until n callers have
// arrived: three large ingests then all ask for their acknowledgment's
// control number at once, which is the worst case the pool must survive.
type allArrive struct {
	store.Store
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func (a *allArrive) wait(ctx context.Context) error {
	a.mu.Lock()
	a.arrived++
	if a.arrived == a.n {
		close(a.all)
	}
	a.mu.Unlock()
	select {
	case <-a.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *allArrive) NextControlNumber(ctx context.Context, sender string) (int64, error) {
	if err := a.wait(ctx); err != nil {
		return 0, err
	}
	return a.Store.NextControlNumber(ctx, sender)
}

// openSchema opens a migrated store with opts in a schema private to t.
func openSchema(t *testing.T, opts Options) *Store {
	opts.Schema = fmt.Sprintf("t_%d_%d", time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	ctx := context.Background()
	s, err := Open(ctx, testenv.PostgresURL(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{opts.Schema}.Sanitize()+" CASCADE")
		s.Close()
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConcurrentLargeIngestsSmallPoolNoDeadlock: LISTEN holds one
// connection, three large files (each past the batch size, so each writes
// in an explicit transaction) are ingested at once and all three allocate
// their 999's control number together. No ingest may wait for a second
// connection while holding one: with a pool of 2 or 4 all three finish,
// parsed whole before their writes or written while parsed (piped:
// inbox.Options.PipeFrom 1, the write holding its connection while the
// parse asks for the control number).
func TestConcurrentLargeIngestsSmallPoolNoDeadlock(t *testing.T) {
	for _, tc := range []struct {
		conns    int32
		pipeFrom int
	}{{2, 0}, {4, 0}, {2, 1}, {4, 1}} {
		conns := tc.conns
		t.Run(fmt.Sprintf("max_conns=%d/piped=%v", conns, tc.pipeFrom > 0), func(t *testing.T) {
			s := openSchema(t, Options{MaxConns: conns})
			ctx, cancel := context.WithCancel(context.Background())
			listening := make(chan struct{})
			var once sync.Once
			var lwg sync.WaitGroup
			lwg.Add(1)
			go func() {
				defer lwg.Done()
				s.Listen(ctx, func() { once.Do(func() { close(listening) }) }, nil)
			}()
			defer func() { cancel(); lwg.Wait() }()
			<-listening

			const files = 3
			// Piped, a parse held at the barrier would hold its write's
			// connection for others' sake, which no ingest does.
			arrive := files
			if tc.pipeFrom > 0 {
				arrive = 1
			}
			bs := &allArrive{Store: s, n: arrive, all: make(chan struct{})}
			// A hang is the failure; the deadline only turns it into an error.
			ictx, icancel := context.WithTimeout(ctx, 45*time.Second)
			defer icancel()
			var wg sync.WaitGroup
			errs := make([]error, files)
			for i := range files {
				var buf bytes.Buffer
				if _, err := (x12gen.Remit{Receiver: fmt.Sprintf("RCV%d", i), Control: 100 + i,
					Trace: fmt.Sprintf("POOL%d-", i), SetsPerGroup: 2 * flushAtRows}).Write(&buf); err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := inbox.Ingest(ictx, inbox.Options{Store: bs, Routes: storetest.Routes, PipeFrom: tc.pipeFrom},
						inbox.FileInfo{Source: "pool", Path: fmt.Sprintf("big%d.835", i), Size: int64(buf.Len()),
							SHA256: fmt.Sprintf("sha%d", i), CorrelationID: store.NewCorrelationID(), Now: time.Now().UTC()},
						bytes.NewReader(buf.Bytes()))
					if err == nil && (r.Count(inbox.Processed) != 2*flushAtRows || len(r.AckKeys) != 1) {
						err = fmt.Errorf("processed %d, acks %d", r.Count(inbox.Processed), len(r.AckKeys))
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("ingest %d: %v (pool deadlock?)", i, err)
				}
			}
		})
	}
}

// TestIngestDeadlineWhenPoolExhausted: an ingest that cannot get a
// connection fails at its deadline (store.ingest_timeout) with nothing
// recorded, instead of waiting forever; once a connection is free the same
// file is ingested.
func TestIngestDeadlineWhenPoolExhausted(t *testing.T) {
	s := openSchema(t, Options{MaxConns: 1})
	ctx := context.Background()
	held, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := storetest.Fixture(t, "835_canonical.x12")
	file := func() (*inbox.Report, error) {
		return inbox.Ingest(ctx, inbox.Options{Store: s, Routes: storetest.Routes, Timeout: 300 * time.Millisecond},
			inbox.FileInfo{Source: "pool", Path: "a.835", Size: int64(len(data)), SHA256: "a",
				CorrelationID: store.NewCorrelationID(), Now: time.Now().UTC()}, bytes.NewReader(data))
	}
	if _, err := file(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with the pool exhausted: %v, want the ingest deadline", err)
	}
	held.Release()
	r, err := file()
	if err != nil || r.Count(inbox.Processed) != 1 {
		t.Fatalf("after release: %v %+v", err, r)
	}
}

// TestListenReportsWhyItReconnects: when its connection cannot be had,
// Listen tells onError why and when it retries, instead of dropping the
// error.
func TestListenReportsWhyItReconnects(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	pool.Close() // every Acquire now fails
	s := &Store{pool: pool}
	var errs []error
	var waits []time.Duration
	err = s.Listen(ctx, func() {}, func(err error, retryIn time.Duration) {
		errs, waits = append(errs, err), append(waits, retryIn)
		if len(errs) == 2 {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 2 || errs[0] == nil || errs[1] == nil {
		t.Fatalf("onError got %v, want two connection errors", errs)
	}
	if waits[0] != 100*time.Millisecond || waits[1] != 200*time.Millisecond {
		t.Errorf("retries in %v, want 100ms then 200ms", waits)
	}
}

// TestListenBackoffStartsOverAfterAListen: a listening connection that
// drops now and then (a PostgreSQL restart, a failover) is re-opened after
// the first, short wait each time, not after a wait that grew over the
// life of the process.
func TestListenBackoffStartsOverAfterAListen(t *testing.T) {
	// Its own application name tells this store's backends from those of
	// tests running beside it on the same server.
	app := fmt.Sprintf("ediwatch_listen_test_%d", schemaSeq.Add(1))
	s, err := Open(context.Background(), testenv.PostgresURL(t)+"&application_name="+app, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kill := func() {
		s.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND query = 'LISTEN `+NotifyChannel+`' AND pid <> pg_backend_pid()`, app)
	}
	var waits []time.Duration
	done := make(chan error, 1)
	woken := make(chan struct{}, 1)
	go func() {
		done <- s.Listen(ctx, func() {
			select {
			case woken <- struct{}{}:
			default:
			}
		}, func(err error, retryIn time.Duration) {
			waits = append(waits, retryIn)
			if len(waits) == 3 {
				cancel()
			}
		})
	}()
	for ctx.Err() == nil {
		select {
		case <-woken: // listening (again): drop it
			kill()
		case <-ctx.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the listener did not come back")
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, w := range waits {
		if w != 100*time.Millisecond {
			t.Errorf("reconnect %d waited %s, want 100ms each time after a connection that listened", i+1, w)
		}
	}
}
