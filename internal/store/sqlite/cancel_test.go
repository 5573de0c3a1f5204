package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
)

// TestCanceledIngestionStopsWaitingForTheLockOfARollbackJournal: a dsn
// may keep SQLite's rollback journal (_journal_mode=DELETE; OpenWith adds
// WAL only when the dsn sets no journal mode). There, an ingestion that
// outgrows its page cache must take the exclusive lock in the middle of a
// statement, and waits in the busy handler for the readers that hold the
// database. Cancelled meanwhile, the ingestion ends while the reader still
// holds it, instead of waiting out the reader or the busy timeout.
func TestCanceledIngestionStopsWaitingForTheLockOfARollbackJournal(t *testing.T) {
	ctx := context.Background()
	s, path := migratedStore(t, "?_journal_mode=DELETE&_busy_timeout=600000&_pragma=cache_size(10)")
	// Another process reading: a read transaction holds the shared lock.
	reader, err := sql.Open("sqlite", "file:"+path+"?_journal_mode=DELETE&_txlock=deferred")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	reader.SetMaxOpenConns(2)
	// probe tells whether a new reader can start: not once the ingestion
	// waits for the exclusive lock (it holds the pending lock meanwhile).
	probe, err := sql.Open("sqlite", "file:"+path+"?_journal_mode=DELETE&_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()

	ing := beginTestIngestion(t, s)
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The first set takes the reserved lock (BEGIN IMMEDIATE).
	if err := ing.AddSet(ictx, inbox.SetRecord{Key: "x12:K0", ContentHash: "h", Type: "835"}); err != nil {
		t.Fatal(err)
	}
	rtx, err := reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rtx.QueryRowContext(ctx, "SELECT count(*) FROM inbox").Scan(&n); err != nil {
		t.Fatal(err)
	}
	release := releaseOnce(rtx)
	defer release()

	// Sets whose payloads outgrow the page cache of ten pages.
	added := make(chan error, 1)
	go func() {
		for i := 1; i <= 2000; i++ {
			payload := make([]byte, 32<<10)
			rand.Read(payload)
			doc := fmt.Sprintf(`{"x":%q}`, hex.EncodeToString(payload))
			err := ing.AddSet(ictx, inbox.SetRecord{Key: fmt.Sprint("x12:K", i), ContentHash: "h", Type: "835",
				Effects: []outbox.Effect{{Kind: "payment.posted", Key: fmt.Sprint("payment:", i),
					OrderingKey: "o", Sink: "ledger", Payload: []byte(doc), Hash: "e"}}})
			if err != nil {
				added <- err
				return
			}
		}
		added <- errors.New("2000 sets added without waiting for the exclusive lock")
	}()
	// Wait until the ingestion waits for the exclusive lock.
	for {
		var m int
		err := probe.QueryRowContext(ctx, "SELECT count(*) FROM inbox").Scan(&m)
		if err != nil && strings.Contains(err.Error(), "SQLITE_BUSY") {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-added:
			t.Fatalf("the ingestion never waited for the lock: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	awaitCanceledEnd(t, added, release, "the reader")
}

// TestIngestionOfAWALStoreRunsItsRowsWithoutCancellation: the default
// store is in WAL mode and begins immediate, where an ingestion's row
// statements have nothing to wait for and run without the driver
// watching their context (rowContext); a rollback journal or a deferred
// begin keeps it.
func TestIngestionOfAWALStoreRunsItsRowsWithoutCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for dsn, without := range map[string]bool{"": true, "?_journal_mode=DELETE": false, "?_txlock=deferred": false,
		"?_txlock=exclusive": true} {
		s, _ := migratedStore(t, dsn)
		ing := beginTestIngestion(t, s)
		if err := ing.AddSet(ctx, inbox.SetRecord{Key: "x12:K", ContentHash: "h", Type: "835"}); err != nil {
			t.Fatal(err)
		}
		rctx, err := ing.(*ingestion).rowContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := rctx.Done() == nil; got != without {
			t.Errorf("dsn %q: row statements without cancellation %v, want %v", dsn, got, without)
		}
		ing.Rollback()
		s.Close()
	}
}

// TestCanceledIngestionStopsWaitingForTheWriteLockOfADeferredBegin: a dsn
// may begin transactions deferred (_txlock=deferred; OpenWith adds
// immediate only when the dsn sets none). There, an ingestion's first row
// statement takes the write lock, and waits in the busy handler while
// another writer holds it. Cancelled meanwhile, the ingestion ends while
// the other writer still holds the lock.
func TestCanceledIngestionStopsWaitingForTheWriteLockOfADeferredBegin(t *testing.T) {
	ctx := context.Background()
	s, path := migratedStore(t, "?_txlock=deferred&_busy_timeout=600000")
	// Another process writing: it holds the write lock.
	writer, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	wtx, err := writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	release := releaseOnce(wtx)
	defer release()

	ing := beginTestIngestion(t, s)
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	added := make(chan error, 1)
	go func() {
		added <- ing.AddSet(ictx, inbox.SetRecord{Key: "x12:K0", ContentHash: "h", Type: "835"})
	}()
	// Wait until the ingestion began its transaction (the statement then
	// waits for the write lock): its connection is the one in use.
	for s.db.Stats().InUse == 0 {
		select {
		case err := <-added:
			t.Fatalf("the ingestion did not wait for the write lock: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	time.Sleep(100 * time.Millisecond) // not an assertion: let the statement reach the busy handler
	cancel()
	awaitCanceledEnd(t, added, release, "the other writer")
}

// migratedStore opens a migrated store at a new database with the dsn
// query q ("" or "?..."), closed when t ends, and returns it and the
// database's path.
func migratedStore(t *testing.T, q string) (*Store, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ediwatch.db")
	s, err := Open(ctx, "file:"+path+q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// beginTestIngestion begins an ingestion of a file "a" on s, rolled back
// when t ends.
func beginTestIngestion(t *testing.T, s *Store) inbox.Ingestion {
	t.Helper()
	ing, err := s.BeginIngest(context.Background(), inbox.FileInfo{Source: "test", Path: "a", Size: 1,
		MTime: time.Unix(0, 0), SHA256: "x", CorrelationID: "c", Now: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ing.Rollback)
	return ing
}

// awaitCanceledEnd waits for the cancelled ingestion's outcome on added;
// if none comes in 30 s (not a timing assertion: the other side then lets
// go by release, for the ingestion to end at all), it fails for having
// waited for the other side.
func awaitCanceledEnd(t *testing.T, added <-chan error, release func(), other string) {
	t.Helper()
	select {
	case err := <-added:
		if err == nil {
			t.Fatal("the cancelled ingestion added its set")
		}
		t.Logf("the cancelled ingestion ended: %v", err)
	case <-time.After(30 * time.Second):
		release()
		err := <-added
		t.Fatalf("the cancelled ingestion waited for %s (then: %v)", other, err)
	}
}

// releaseOnce returns a function that rolls tx back the first time it is
// called.
func releaseOnce(tx *sql.Tx) func() {
	var once sync.Once
	return func() { once.Do(func() { tx.Rollback() }) }
}
