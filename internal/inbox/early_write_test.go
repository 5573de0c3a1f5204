package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestConcurrentEarlyWritesWithLookupsOnASmallPool (from an outside
// review): several large files, each written from its first record while
// its claim lookup (two chunks) still runs, ingested at once on a pool of
// one or two connections (the side connection shared by every lookup and
// control number reservation): every ingest ends, with the outcomes of
// ingesting them one by one.
func TestConcurrentEarlyWritesWithLookupsOnASmallPool(t *testing.T) {
	const files = 3
	var data [files][]byte
	for i := range data {
		var b bytes.Buffer
		if _, err := (x12gen.Remit{Trace: fmt.Sprint("CC", i), Control: 100 * (i + 1), SetsPerGroup: 2500}).Write(&b); err != nil {
			t.Fatal(err)
		}
		data[i] = b.Bytes()
	}
	for _, conns := range []int{1, 2} {
		for name, open := range map[string]func(t *testing.T) store.Store{
			"sqlite":   func(t *testing.T) store.Store { return drivertest.SQLiteWith(t, sqlite.Options{MaxConns: conns}) },
			"postgres": func(t *testing.T) store.Store { return pgtest.New(t, postgres.Options{MaxConns: int32(conns)}) },
		} {
			t.Run(fmt.Sprint(name, conns), func(t *testing.T) {
				s := open(t)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				// The first file alone first: sent again below, its
				// lookup finds every set claimed (and clean).
				if _, err := ingestWith(ctx, s, 0, "first0", bytes.NewReader(data[0]), len(data[0])); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				errs := make([]error, 2*files)
				reps := make([]*inbox.Report, 2*files)
				for i := 0; i < 2*files; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						d := data[i%files]
						start := time.Now()
						reps[i], errs[i] = ingestWith(ctx, s, 1, fmt.Sprint("again", i), bytes.NewReader(d), len(d))
						t.Logf("ingest %d: %v (%v)", i, time.Since(start), errs[i])
					}(i)
				}
				wg.Wait()
				total := 0
				for i, err := range errs {
					if err != nil {
						t.Fatalf("ingest %d: %v", i, err)
					}
					total += reps[i].Count(inbox.Processed)
				}
				if total != 2*2500 {
					t.Errorf("%d sets processed, want %d", total, 2*2500)
				}
			})
		}
	}
}

// TestCancelDuringTheLookupOfAnEarlyWrite: an ingest cancelled while its
// claim lookup runs and its write, begun at the first record, waits for
// the parse, returns the cancellation, records nothing and leaves no
// goroutine behind, on a pool of one connection; the store then ingests
// the file again.
func TestCancelDuringTheLookupOfAnEarlyWrite(t *testing.T) {
	var b bytes.Buffer
	if _, err := (x12gen.Remit{Trace: "CX", SetsPerGroup: 2500}).Write(&b); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(t *testing.T) store.Store{
		"sqlite":   func(t *testing.T) store.Store { return drivertest.SQLiteWith(t, sqlite.Options{MaxConns: 1}) },
		"postgres": func(t *testing.T) store.Store { return pgtest.New(t, postgres.Options{MaxConns: 1}) },
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			if _, err := ingestWith(context.Background(), s, 0, "first", bytes.NewReader(b.Bytes()), b.Len()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ctx, stop := context.WithCancel(ctx)
			l := &lookupAfterWrite{Store: s, cancel: stop, begun: make(chan struct{})}
			if _, err := ingestWith(ctx, l, 1, "again", bytes.NewReader(b.Bytes()), b.Len()); err == nil || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled ingest: %v", err)
			}
			r, err := ingestWith(context.Background(), s, 0, "again2", bytes.NewReader(b.Bytes()), b.Len())
			if err != nil || r.Count(inbox.Duplicate) != 2500 {
				t.Fatalf("again: %v", err)
			}
			c, err := s.Counts(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("counts %+v", c)
		})
	}
}
