package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// BenchmarkIngestVsBareCommit: the same comparison on the embedded store.
// Run: go test ./internal/store/sqlite -run XXX -bench . -benchtime 1x
func BenchmarkIngestVsBareCommit(b *testing.B) {
	s := newStore(b)
	db := s.(*Store).db
	if _, err := db.Exec("CREATE TABLE bare_insert (v INTEGER, at INTEGER)"); err != nil {
		b.Fatal(err)
	}
	storetest.BenchIngestVsBareCommit(b, s, func(ctx context.Context, v int64) error {
		_, err := db.ExecContext(ctx, "INSERT INTO bare_insert (v, at) VALUES (?, ?)", v, time.Now().UnixMicro())
		return err
	}, 3*time.Second)
}

// BenchmarkSynchronousFullVsNormal measures what synchronous=FULL (the
// store's default) costs against NORMAL on the same disk in the same run:
// ingests per second of distinct one-set 835 files with 1 and 4 writers,
// and the time to ingest one 5,000-set file. FULL syncs the WAL at every
// commit, so the cost is per commit, not per byte. The two are measured in
// alternating rounds so drift hits both alike.
// Run: go test ./internal/store/sqlite -run XXX -bench SynchronousFullVsNormal -benchtime 1x
func BenchmarkSynchronousFullVsNormal(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	open := func(name, query string, want int) store.Store {
		s, err := Open(ctx, filepath.Join(dir, name)+query)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		if err := s.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		var v int
		if err := s.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&v); err != nil || v != want {
			b.Fatalf("%s: synchronous %d, want %d (%v)", name, v, want, err)
		}
		return s
	}
	normal := open("normal.db", "?_synchronous=NORMAL", 1)
	full := open("full.db", "", 2)
	var seq atomic.Int64
	ingestOne := func(s store.Store, sets int) error {
		i := seq.Add(1)
		var buf bytes.Buffer
		if _, err := (x12gen.Remit{Control: int(i), Trace: fmt.Sprintf("S%d-", i), SetsPerGroup: sets}).Write(&buf); err != nil {
			return err
		}
		r, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: storetest.Routes}, inbox.FileInfo{Source: "bench",
			Path: fmt.Sprintf("f%d", i), Size: int64(buf.Len()), SHA256: "x", CorrelationID: "c", Now: time.Now()},
			bytes.NewReader(buf.Bytes()))
		if err == nil && r.Count(inbox.Processed) != sets {
			err = fmt.Errorf("file %d: %d of %d sets processed", i, r.Count(inbox.Processed), sets)
		}
		return err
	}
	rate := func(s store.Store, writers int, d time.Duration) (n int64, secs float64) {
		var done atomic.Int64
		deadline := time.Now().Add(d)
		start := time.Now()
		var wg sync.WaitGroup
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if err := ingestOne(s, 1); err != nil {
						b.Error(err)
						return
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		return done.Load(), time.Since(start).Seconds()
	}
	for b.Loop() {
		for _, w := range []int{1, 4} {
			var nN, nF int64
			var sN, sF float64
			for range 4 {
				n, s := rate(normal, w, 750*time.Millisecond)
				nN, sN = nN+n, sN+s
				n, s = rate(full, w, 750*time.Millisecond)
				nF, sF = nF+n, sF+s
			}
			rn, rf := float64(nN)/sN, float64(nF)/sF
			b.ReportMetric(rn, fmt.Sprintf("normal-ingests/s-%dw", w))
			b.ReportMetric(rf, fmt.Sprintf("full-ingests/s-%dw", w))
			b.ReportMetric(rf/rn, fmt.Sprintf("ratio-full-%dw", w))
		}
		var tN, tF time.Duration
		for range 2 {
			for _, x := range []struct {
				s store.Store
				t *time.Duration
			}{{normal, &tN}, {full, &tF}} {
				start := time.Now()
				if err := ingestOne(x.s, 5000); err != nil {
					b.Fatal(err)
				}
				*x.t += time.Since(start)
			}
		}
		b.ReportMetric(tN.Seconds()/2, "normal-5000-sets-s")
		b.ReportMetric(tF.Seconds()/2, "full-5000-sets-s")
		b.ReportMetric(tF.Seconds()/tN.Seconds(), "ratio-full-5000-sets")
	}
}

// BenchmarkIngest100MB: a 100 MB 835 (60,580 sets of 8 claims) ingested
// twice into a fresh store, beside sha256 of the same bytes.
// Run: go test ./internal/store/sqlite -run XXX -bench Ingest100MB -benchtime 1x
//
// The bare load beside them is the floor of the writes: the inbox and
// outbox rows the first ingest wrote, read back into memory, then inserted
// into a fresh store's tables by one prepared INSERT per table in one
// transaction.
func BenchmarkIngest100MB(b *testing.B) {
	data := storetest.BigFile(b, storetest.BigRemit)
	s := newStore(b).(*Store)
	storetest.BenchIngestBigFile(b, s, data, func(ctx context.Context) (time.Duration, error) {
		return bareLoad(ctx, s.db, newStore(b).(*Store).db, "inbox", "outbox")
	}, 10)
}

// bareLoad copies the rows of tables from src to the empty tables of dst
// and returns how long the inserts and their commit took.
func bareLoad(ctx context.Context, src, dst *sql.DB, tables ...string) (time.Duration, error) {
	type table struct {
		name, insert string
		rows         [][]any
	}
	var all []table
	for _, name := range tables {
		rows, err := src.QueryContext(ctx, "SELECT * FROM "+name)
		if err != nil {
			return 0, err
		}
		cols, _ := rows.Columns()
		t := table{name: name, insert: "INSERT INTO " + name + " VALUES (" +
			strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return 0, err
			}
			t.rows = append(t.rows, vals)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		all = append(all, t)
	}
	start := time.Now()
	tx, err := dst.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	for _, t := range all {
		st, err := tx.PrepareContext(ctx, t.insert)
		if err != nil {
			return 0, err
		}
		for _, r := range t.rows {
			if _, err := st.ExecContext(ctx, r...); err != nil {
				return 0, fmt.Errorf("%s: %w", t.name, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// BenchmarkCompleteManyAttempts: CompleteMany of 32 rows with and without
// their attempts recorded, side by side.
// Run: go test ./internal/store/sqlite -run XXX -bench CompleteManyAttempts -benchtime 1x
func BenchmarkCompleteManyAttempts(b *testing.B) {
	storetest.BenchCompleteManyAttempts(b, newStore(b))
}

func BenchmarkResendManyInterchanges(b *testing.B) {
	storetest.BenchResendManyInterchanges(b, newStore)
}
