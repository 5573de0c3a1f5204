package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// pipedFile is a file of three interchanges of 40 sets, a 999 each: well
// past a PipeFrom of 1 byte, with records of every kind.
func pipedFile(t *testing.T, trace string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := (x12gen.Remit{Trace: trace, Interchanges: 3, SetsPerGroup: 40, ClaimsPerSet: 3}).Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func ingestWith(ctx context.Context, s inbox.Ingester, pipeFrom int, path string, r io.ReadSeeker,
	size int) (*inbox.Report, error) {
	return inbox.Ingest(ctx, inbox.Options{Store: s, Routes: storetest.Routes, PipeFrom: pipeFrom},
		inbox.FileInfo{Source: "test", Path: path, Size: int64(size), MTime: t0, SHA256: "sha-" + path,
			CorrelationID: "corr-" + path, Now: t0}, r)
}

// nothingRecorded fails t unless s holds no inbox, outbox or file row.
func nothingRecorded(t *testing.T, s store.Store) {
	t.Helper()
	if c, err := s.Counts(context.Background()); err != nil || len(c.Inbox)+len(c.Outbox)+len(c.Files) != 0 {
		t.Fatalf("recorded %+v (%v)", c, err)
	}
}

// bothStores runs fn as the subtests "sqlite" and "postgres", each with
// two fresh stores of that driver.
func bothStores(t *testing.T, fn func(t *testing.T, a, b store.Store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, drivertest.SQLite(t), drivertest.SQLite(t)) })
	t.Run("postgres", func(t *testing.T) {
		fn(t, pgtest.New(t, postgres.Options{}), pgtest.New(t, postgres.Options{}))
	})
}

// TestPipedWriteRecordsWhatABufferedWriteRecords: files written while
// they are parsed report and record what the same files written after
// their parse do, in each outcome (new; every set a duplicate; a
// regenerated copy under other control numbers, every set a business
// duplicate), and their rows are delivered in the same order with the same
// payloads.
func TestPipedWriteRecordsWhatABufferedWriteRecords(t *testing.T) {
	bothStores(t, func(t *testing.T, bufferedStore, pipedStore store.Store) {
		ctx := context.Background()
		data := pipedFile(t, "EQ")
		regen := data
		for i := 1; i <= 3; i++ {
			for _, end := range []string{"*", "~"} { // ISA13, IEA02
				regen = bytes.ReplaceAll(regen, fmt.Appendf(nil, "*%09d%s", i, end), fmt.Appendf(nil, "*%09d%s", 900+i, end))
			}
		}
		type outcome struct {
			Reports []*inbox.Report
			Rows    []string
		}
		run := func(s store.Store, pipeFrom int) outcome {
			var o outcome
			for i, f := range [][]byte{data, data, regen} {
				r, err := ingestWith(ctx, s, pipeFrom, fmt.Sprint("f", i), bytes.NewReader(f), len(f))
				if err != nil {
					t.Fatalf("pipeFrom %d, file %d: %v", pipeFrom, i, err)
				}
				o.Reports = append(o.Reports, r)
			}
			for _, sink := range []string{"ledger", "acks"} {
				for _, r := range flat(deliver(t, s, sink)) {
					row := fmt.Sprintf("%s %s %s %s", r.Sink, r.Kind, r.EffectKey, r.OrderingKey)
					if r.Kind == process.KindPayment {
						row += " " + string(r.Payload)
					}
					o.Rows = append(o.Rows, row)
				}
			}
			return o
		}
		buffered, piped := run(bufferedStore, 0), run(pipedStore, 1)
		if n := buffered.Reports[0].Count(inbox.Processed); n != 120 || buffered.Reports[1].Count(inbox.Duplicate) != 120 ||
			buffered.Reports[2].Count(inbox.BusinessDuplicate) != 120 || len(buffered.Rows) != 120+6 {
			t.Fatalf("buffered: %d processed, %d duplicates, %d business duplicates, %d rows", n,
				buffered.Reports[1].Count(inbox.Duplicate), buffered.Reports[2].Count(inbox.BusinessDuplicate),
				len(buffered.Rows))
		}
		for i := range buffered.Reports {
			if !reflect.DeepEqual(buffered.Reports[i], piped.Reports[i]) {
				t.Errorf("file %d: piped report\n%+v\nbuffered\n%+v", i, piped.Reports[i], buffered.Reports[i])
			}
		}
		if !reflect.DeepEqual(buffered.Rows, piped.Rows) {
			t.Errorf("piped rows\n%v\nbuffered\n%v", piped.Rows, buffered.Rows)
		}
	})
}

// secondPass is a file whose second read (process.File reads a file
// twice) calls at once it reaches offset off; at's error, if any, is the
// read's.
type secondPass struct {
	*bytes.Reader
	off     int64
	at      func() error
	rewound bool
	read    atomic.Int64 // bytes of the second pass read
}

func (r *secondPass) Read(p []byte) (int, error) {
	if r.rewound && r.at != nil && r.Size()-int64(r.Len()) >= r.off {
		if err := r.at(); err != nil {
			return 0, err
		}
	}
	n, err := r.Reader.Read(p)
	if r.rewound {
		r.read.Add(int64(n))
	}
	return n, err
}

func (r *secondPass) Seek(off int64, whence int) (int64, error) {
	r.rewound = true
	return r.Reader.Seek(off, whence)
}

// TestPipedWriteOfAFileThatFailsToReadRecordsNothing: a file whose read
// fails halfway, after its write has begun and taken sets, records nothing
// and reports the read's error; its write ends (TestMain's goleak: no
// goroutine is left).
func TestPipedWriteOfAFileThatFailsToReadRecordsNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		data := pipedFile(t, "RD")
		boom := errors.New("the disk went away")
		r := &secondPass{Reader: bytes.NewReader(data), off: int64(len(data)) / 2, at: func() error { return boom }}
		if _, err := ingestWith(context.Background(), s, 1, "f", r, len(data)); !errors.Is(err, boom) {
			t.Fatalf("ingest: %v, want %v", err, boom)
		}
		nothingRecorded(t, s)
	})
}

// failingStore's ingestions fail their set number failAt.
type failingStore struct {
	store.Store
	failAt int
	err    error
}

func (f *failingStore) BeginIngest(ctx context.Context, fi inbox.FileInfo) (inbox.Ingestion, error) {
	ing, err := f.Store.BeginIngest(ctx, fi)
	return &failingIngestion{Ingestion: ing, s: f}, err
}

type failingIngestion struct {
	inbox.Ingestion
	s    *failingStore
	sets int
}

func (f *failingIngestion) AddSet(ctx context.Context, r inbox.SetRecord) error {
	if f.sets++; f.sets == f.s.failAt {
		return f.s.err
	}
	return f.Ingestion.AddSet(ctx, r)
}

// TestPipedWriteThatFailsStopsTheParse: a write that fails while its
// file is still parsed reports its own error (not the pipe's), records
// nothing, and stops the parse: the rest of the file is not read.
func TestPipedWriteThatFailsStopsTheParse(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		var b bytes.Buffer
		if _, err := (x12gen.Remit{Trace: "WF", SetsPerGroup: 3000, ClaimsPerSet: 2}).Write(&b); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("the store refused a set")
		r := &secondPass{Reader: bytes.NewReader(b.Bytes())}
		_, err := ingestWith(context.Background(), &failingStore{Store: s, failAt: 10, err: boom}, 1, "f", r, b.Len())
		if !errors.Is(err, boom) || err.Error() != boom.Error() {
			t.Fatalf("ingest: %v, want %v", err, boom)
		}
		if got := r.read.Load(); got >= int64(b.Len())/2 {
			t.Errorf("the parse read %d of %d bytes after the write failed at its 10th set", got, b.Len())
		}
		nothingRecorded(t, s)
	})
}

// TestPipedWriteCanceledRecordsNothing: an ingest canceled while its
// write is open and its parse waits on its file returns the context's
// error, records nothing, and leaves no goroutine behind.
func TestPipedWriteCanceledRecordsNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		data := pipedFile(t, "CX")
		ctx, cancel := context.WithCancel(context.Background())
		var once sync.Once
		waiting := make(chan struct{})
		r := &secondPass{Reader: bytes.NewReader(data), off: int64(len(data)) / 2, at: func() error {
			once.Do(func() { close(waiting) })
			<-ctx.Done()
			return nil // the parse reads on, and checks its context between sets
		}}
		done := make(chan error, 1)
		go func() {
			_, err := ingestWith(ctx, s, 1, "f", r, len(data))
			done <- err
		}()
		<-waiting
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("ingest: %v, want context.Canceled", err)
		}
		nothingRecorded(t, s)
	})
}

// oneConnection returns a migrated SQLite store whose pool holds one
// connection (store.max_conns 1), closed when t ends.
func oneConnection(t *testing.T) *sqlite.Store {
	return drivertest.SQLiteWith(t, sqlite.Options{MaxConns: 1})
}

// lookupAfterWrite holds every claim lookup after the first until its
// file's ingestion has begun (or a minute has passed: then it fails);
// with cancel set, it then cancels the ingest instead of answering.
type lookupAfterWrite struct {
	store.Store
	lookups atomic.Int32
	begun   chan struct{}
	once    sync.Once
	cancel  context.CancelFunc
}

func (l *lookupAfterWrite) ClaimedKeys(ctx context.Context, keys []string) (map[string]inbox.Claim, error) {
	if l.lookups.Add(1) > 1 {
		select {
		case <-l.begun:
		case <-time.After(time.Minute):
			return nil, errors.New("the write never began while the lookup ran")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if l.cancel != nil {
			l.cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return l.Store.ClaimedKeys(ctx, keys)
}

func (l *lookupAfterWrite) BeginIngest(ctx context.Context, f inbox.FileInfo) (inbox.Ingestion, error) {
	l.once.Do(func() { close(l.begun) })
	return l.Store.BeginIngest(ctx, f)
}

// TestPipedWriteBeginsWhileTheClaimLookupRuns: a large file's write
// begins while the claim lookup of its keys still runs (the lookup takes a
// connection of its own, so the write, which waits for the parse, which
// waits for the lookup, is never what the lookup waits for), with one pool
// connection on both drivers. Every set of the file claimed already (a
// lookup of five chunks), written again from its first record: the
// lookup's second chunk is held until the write has begun. Before, the
// write waited for the whole lookup: the test failed.
func TestPipedWriteBeginsWhileTheClaimLookupRuns(t *testing.T) {
	var b bytes.Buffer
	if _, err := (x12gen.Remit{Trace: "LK", SetsPerGroup: 9000}).Write(&b); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(t *testing.T) store.Store{
		"sqlite":   func(t *testing.T) store.Store { return oneConnection(t) },
		"postgres": func(t *testing.T) store.Store { return pgtest.New(t, postgres.Options{MaxConns: 1}) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			if _, err := ingestWith(ctx, s, 0, "first", bytes.NewReader(b.Bytes()), b.Len()); err != nil {
				t.Fatal(err)
			}
			l := &lookupAfterWrite{Store: s, begun: make(chan struct{})}
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			r, err := ingestWith(ctx, l, 0, "again", bytes.NewReader(b.Bytes()), b.Len())
			if err != nil {
				t.Fatalf("written again while parsed: %v", err)
			}
			if r.Count(inbox.Duplicate) != 9000 || l.lookups.Load() != 5 {
				t.Errorf("%d duplicates of 9000, %d lookups", r.Count(inbox.Duplicate), l.lookups.Load())
			}
		})
	}
}

// TestPipedAnswersWithOneConnection: a received 999 late in a file
// written while it is parsed looks up what it answers while the file's
// write holds the store's only pool connection (SQLite, store.max_conns
// 1): the lookup takes a connection of its own, and names the original.
// Before, it waited for the write, which waited for the parse, until the
// deadline.
func TestPipedAnswersWithOneConnection(t *testing.T) {
	ctx := context.Background()
	s := oneConnection(t)
	var claims bytes.Buffer
	if err := (x12gen.Claims{Sender: "RIVERSIDE", Receiver: "CLEARING", Control: 41}).Write(&claims); err != nil {
		t.Fatal(err)
	}
	opts := inbox.Options{Store: s, Routes: answerRoutes}
	info := func(path string, n int) inbox.FileInfo {
		return inbox.FileInfo{Source: "test", Path: path, Size: int64(n), MTime: t0, SHA256: "sha-" + path,
			CorrelationID: "corr-" + path, Now: t0}
	}
	if _, err := inbox.Ingest(ctx, opts, info("a.837", claims.Len()), bytes.NewReader(claims.Bytes())); err != nil {
		t.Fatal(err)
	}
	// A large interchange of payments first: the write holds its
	// connection (the parse's records reach it 256 KB at a time) before
	// the 999 at the end is read.
	var answers bytes.Buffer
	if _, err := (x12gen.Remit{Trace: "AN", SetsPerGroup: 1000}).Write(&answers); err != nil {
		t.Fatal(err)
	}
	answers.Write(answer999(51, "0001"))
	opts.PipeFrom = 1
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := inbox.Ingest(ctx, opts, info("answers.x12", answers.Len()), bytes.NewReader(answers.Bytes()))
	if err != nil {
		t.Fatalf("answers written while parsed: %v", err)
	}
	if r.Count(inbox.Processed) != 1001 {
		t.Fatalf("outcomes %+v", r.Sets)
	}
	named := 0
	for _, row := range flat(deliver(t, s, "acks")) {
		if row.Kind == process.KindAckReceived && bytes.Contains(row.Payload, []byte(`"original_key":"x12:`)) {
			named++
		}
	}
	if named != 1 {
		t.Errorf("%d received 999s named what they answer, want 1", named)
	}
}

// countedAsks counts the control number requests its ingestions answer
// (Ingestion.NextControlNumbers).
type countedAsks struct {
	store.Store
	asks atomic.Int64
}

func (c *countedAsks) BeginIngest(ctx context.Context, f inbox.FileInfo) (inbox.Ingestion, error) {
	ing, err := c.Store.BeginIngest(ctx, f)
	return &countedIngestion{Ingestion: ing, asks: &c.asks}, err
}

type countedIngestion struct {
	inbox.Ingestion
	asks *atomic.Int64
}

func (c *countedIngestion) NextControlNumbers(ctx context.Context, sender string, n int64) (int64, int64, error) {
	c.asks.Add(1)
	return c.Ingestion.NextControlNumbers(ctx, sender, n)
}

// ackControls returns the ISA13 of every 999 s delivers to the acks sink.
func ackControls(t *testing.T, s store.Store) []int {
	t.Helper()
	var out []int
	for _, r := range flat(deliver(t, s, "acks")) {
		var m struct{ X12 string }
		if err := json.Unmarshal(r.Payload, &m); err != nil || len(m.X12) < 99 {
			t.Fatalf("999 payload %q: %v", r.Payload, err)
		}
		n, err := strconv.Atoi(m.X12[90:99])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// TestPipedAcknowledgmentsTakeControlNumbersWithoutWaitingForTheWrite: a
// file of many interchanges written while it is parsed numbers its 999s
// without asking the write for each (the parse would wait for the write
// to catch up at every interchange, and parse and write would run by
// turns): on PostgreSQL it never asks the write, on SQLite it asks for
// blocks. The numbers are unique and follow one another across files, the
// unused rest of a block coming back to the store; on SQLite a write that
// fails takes its numbers back with it.
func TestPipedAcknowledgmentsTakeControlNumbersWithoutWaitingForTheWrite(t *testing.T) {
	const interchanges = 200
	file := func(control int) []byte {
		var b bytes.Buffer
		if _, err := (x12gen.Remit{Trace: fmt.Sprint("CN", control), Control: control, Interchanges: interchanges,
			SetsPerGroup: 1, ClaimsPerSet: 1}).Write(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	// run ingests a failing file, then two files, into s: at most maxAsks
	// requests, the 999s numbered in order from firstControl (0: any).
	run := func(t *testing.T, s store.Store, asks *atomic.Int64, maxAsks int64, firstControl int) {
		ctx := context.Background()
		// A write that fails after its parse has numbered most of its
		// 999s records nothing and leaves no number taken.
		bad := file(5000)
		_, err := ingestWith(ctx, &failingStore{Store: s, failAt: interchanges - 1, err: errors.New("disk on fire")},
			1, "bad", bytes.NewReader(bad), len(bad))
		if err == nil {
			t.Fatal("the failing write succeeded")
		}
		asks.Store(0)
		for i, control := range []int{1, 1000} {
			f := file(control)
			r, err := ingestWith(ctx, s, 1, fmt.Sprint("f", i), bytes.NewReader(f), len(f))
			if err != nil || r.Count(inbox.Processed) != interchanges {
				t.Fatalf("file %d: %v", i, err)
			}
		}
		if n := asks.Load(); n > maxAsks {
			t.Errorf("the write was asked for control numbers %d times for %d 999s, want at most %d",
				n, 2*interchanges, maxAsks)
		}
		got := ackControls(t, s)
		if len(got) != 2*interchanges {
			t.Fatalf("%d 999s, want %d", len(got), 2*interchanges)
		}
		for i, n := range got {
			if n != got[0]+i {
				t.Fatalf("999 control numbers %v, want %d numbers in order", got, 2*interchanges)
			}
		}
		if firstControl > 0 && got[0] != firstControl {
			t.Errorf("the first committed 999 has control number %d, want %d", got[0], firstControl)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		s := &countedAsks{Store: drivertest.SQLite(t)}
		// Blocks of 1, 2, 4, … 64 numbers: 9 asks for a file's 200 (the
		// second file's first 55 from what the first left unused).
		run(t, s, &s.asks, 2*9, 1)
	})
	t.Run("postgres", func(t *testing.T) {
		s := &countedAsks{Store: pgtest.New(t, postgres.Options{})}
		// Numbers are reserved beside the write, never taken back: those
		// the parse took before the write failed are a gap.
		run(t, s, &s.asks, 0, 0)
	})
}
