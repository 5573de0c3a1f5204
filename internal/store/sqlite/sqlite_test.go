package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
	"github.com/ediwatch/ediwatch/migrations"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t testing.TB) store.Store {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "ediwatch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

// TestParkedRowsAreSwept: storetest.ParkedRowsAreSwept, the row ahead
// delivered by hand.
func TestParkedRowsAreSwept(t *testing.T) {
	s := newStore(t).(*Store)
	storetest.ParkedRowsAreSwept(t, s, func(t *testing.T, id int64) {
		if _, err := s.DB().Exec(`UPDATE outbox SET status = 'delivered' WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
	})
}

// TestKeysMigrationKeepsRows: migration 0003 rebuilds inbox and sighting
// (SQLite cannot alter a CHECK constraint); rows written under 0001 keep
// every column, and outbox rows get an empty effect hash.
func TestKeysMigrationKeepsRows(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ediwatch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	schema, err := fs.ReadFile(migrations.FS, "sqlite/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{string(schema),
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO inbox VALUES ('x12:K', 'rejected', 'h', '835', 'r', '{"a":1}', 'src', 'p', 'sha', 'corr', 5, 6)`,
		`INSERT INTO sighting VALUES (7, 'conflict', 'x12:K', 'h2', 'src', 'p2', 'sha2', 'corr2', 'corr', 8)`,
		`INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id, payload, next_attempt_at,
			created_at, updated_at) VALUES ('payment:P:T', 'payment.posted', 'ledger', 'o', 'corr', '{}', 1, 1, 1)`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var inbox, sighting, hash string
	s.db.QueryRowContext(ctx, `SELECT key||status||content_hash||set_type||reason||summary||source||path||file_sha256||
		correlation_id||created_at||updated_at FROM inbox`).Scan(&inbox)
	s.db.QueryRowContext(ctx, `SELECT id||kind||key||content_hash||source||path||file_sha256||correlation_id||
		original_correlation_id||created_at FROM sighting`).Scan(&sighting)
	s.db.QueryRowContext(ctx, `SELECT 'hash:'||effect_hash FROM outbox`).Scan(&hash)
	if inbox != `x12:Krejectedh835r{"a":1}srcpshacorr56` || sighting != "7conflictx12:Kh2srcp2sha2corr2corr8" || hash != "hash:" {
		t.Errorf("after migration: inbox %q, sighting %q, outbox %q", inbox, sighting, hash)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE inbox SET status = 'conflict'`); err != nil {
		t.Errorf("status conflict refused: %v", err)
	}
}

// pausingReader serves data and, on the document pass (after the first
// rewind), stops once past the middle until resume is closed: the ingest
// is then deterministically in the middle of parsing its file.
type pausingReader struct {
	*bytes.Reader
	half    int64
	rewound bool
	paused  bool
	reached chan struct{}
	resume  chan struct{}
}

func (p *pausingReader) Seek(off int64, whence int) (int64, error) {
	p.rewound = true
	return p.Reader.Seek(off, whence)
}

func (p *pausingReader) Read(b []byte) (int, error) {
	pos := p.Reader.Size() - int64(p.Reader.Len())
	if p.rewound && !p.paused && pos >= p.half {
		p.paused = true
		close(p.reached)
		<-p.resume
	}
	if p.rewound && !p.paused && pos+int64(len(b)) > p.half {
		b = b[:p.half-pos+1]
	}
	return p.Reader.Read(b)
}

// TestParseHoldsNoWriteLock: while a large file is being parsed, another
// connection (another process, with a short busy timeout) can complete a
// delivery and renew a lease. The write lock is taken only to write.
func TestParseHoldsNoWriteLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ediwatch.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, path+"?_busy_timeout=200")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := storetest.IngestNow(t, s, "small.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	rows, err := other.Claim(ctx, now, []string{"ledger"}, 1, time.Minute)
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v %d", err, len(rows))
	}
	if _, ok, err := other.AcquireLease(ctx, "source:big", "other", time.Minute, now); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}

	var buf bytes.Buffer
	if _, err := (x12gen.Remit{Control: 7, Trace: "BIG", SetsPerGroup: 300, ClaimsPerSet: 3}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	r := &pausingReader{Reader: bytes.NewReader(buf.Bytes()), half: int64(buf.Len() / 2),
		reached: make(chan struct{}), resume: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		res, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: storetest.Routes}, inbox.FileInfo{Source: "big",
			Path: "big.835", Size: int64(buf.Len()), SHA256: "big", CorrelationID: store.NewCorrelationID(), Now: now},
			r)
		if err == nil && res.Count(inbox.Processed) != 300 {
			err = fmt.Errorf("processed %d", res.Count(inbox.Processed))
		}
		done <- err
	}()
	<-r.reached
	if err := storetest.Complete(ctx, other, rows[0].ID, rows[0].LeaseToken, now, 200); err != nil {
		t.Errorf("relay completion during the parse: %v", err)
	}
	if _, ok, err := other.AcquireLease(ctx, "source:big", "other", time.Minute, now); err != nil || !ok {
		t.Errorf("lease renewal during the parse: %v %v", ok, err)
	}
	close(r.resume)
	if err := <-done; err != nil {
		t.Fatalf("ingest: %v", err)
	}
}

// TestSynchronousFull: the store commits with synchronous=FULL, so a
// committed ingest survives a power cut after its file was deleted from
// the drop, whatever else the dsn sets.
func TestSynchronousFull(t *testing.T) {
	dir := t.TempDir()
	for _, dsn := range []string{
		filepath.Join(dir, "a.db"),
		"file:" + filepath.Join(dir, "b.db"),
		"file:" + filepath.Join(dir, "c.db") + "?_busy_timeout=1000",
		"file:" + filepath.Join(dir, "d.db") + "?_pragma=cache_size(-4000)",
	} {
		s, err := Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		// Every pooled connection has it: hold several at once.
		var conns []*sql.Conn
		for range 3 {
			c, err := s.DB().Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			var v int
			if err := c.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&v); err != nil {
				t.Fatal(err)
			}
			if v != 2 {
				t.Errorf("%s: PRAGMA synchronous = %d, want 2 (FULL)", dsn, v)
			}
		}
		for _, c := range conns {
			c.Close()
		}
		s.Close()
	}
}

// TestPageSizeOfNewDatabasesOnly: a database the store creates has pages
// of PageSize bytes, or those its dsn asks for; a database that exists
// keeps its own (SQLite cannot change it in WAL mode), migrates and
// ingests as before.
func TestPageSizeOfNewDatabasesOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pageSize := func(dsn string) int {
		t.Helper()
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.Ingest(t, s, dsn, storetest.Fixture(t, "835_canonical.x12")); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.DB().QueryRowContext(ctx, "PRAGMA page_size").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fresh, asked := filepath.Join(dir, "fresh.db"), filepath.Join(dir, "asked.db")
	if n := pageSize(fresh); n != PageSize {
		t.Errorf("a new database: %d-byte pages, want %d", n, PageSize)
	}
	if n := pageSize("file:" + asked + "?_pragma=page_size(4096)"); n != 4096 {
		t.Errorf("a new database whose dsn asks for 4096: %d-byte pages", n)
	}
	if n := pageSize(asked); n != 4096 {
		t.Errorf("an existing database of 4096-byte pages, opened again: %d-byte pages", n)
	}
}

// TestSideConnectionKeepsASmallPageCache: the side connection, which
// only probes keys for a parse, keeps a page cache of sideCacheKiB, the
// pool SQLite's default; a dsn that sets one sets it for both.
func TestSideConnectionKeepsASmallPageCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cacheSize := func(db *sql.DB) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	s, err := Open(ctx, filepath.Join(dir, "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if side, pool := cacheSize(s.side), cacheSize(s.db); side != -sideCacheKiB || pool != -2000 {
		t.Errorf("page cache: side %d, pool %d; want %d and SQLite's -2000", side, pool, -sideCacheKiB)
	}
	asked, err := Open(ctx, "file:"+filepath.Join(dir, "b.db")+"?_pragma=cache_size(-4000)")
	if err != nil {
		t.Fatal(err)
	}
	defer asked.Close()
	if side, pool := cacheSize(asked.side), cacheSize(asked.db); side != -4000 || pool != -4000 {
		t.Errorf("page cache the dsn asks for: side %d, pool %d; want -4000 for both", side, pool)
	}
}

// TestPayloadsArePackedAndRowsStoredBeforeStillRead: an effect's payload is
// stored packed (outbox.PackPayload: a large remittance's rows in a
// fraction of the bytes), every reader gets the JSON back, and a row
// stored as plain JSON before payloads were packed reads as it was.
func TestPayloadsArePackedAndRowsStoredBeforeStillRead(t *testing.T) {
	s := newStore(t).(*Store)
	ctx := context.Background()
	now := time.Now()
	payload := []byte(`{"amount":"600.00","claims":[` + strings.Repeat(`{"charge":"100.00","paid":"75.00"},`, 20) +
		`{"charge":"1.00"}]}`)
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "s", Path: "p", SHA256: "f", CorrelationID: "c", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := ing.AddSet(ctx, inbox.SetRecord{Key: "x12:K1", ContentHash: "h", Type: "835", Effects: []outbox.Effect{{
		Kind: "payment.posted", Key: "payment:1", OrderingKey: "o1", Sink: "ledger", Payload: payload, Hash: "e"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := s.db.QueryRowContext(ctx, "SELECT stored_payload FROM outbox WHERE effect_key = 'payment:1'").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 || stored[0] == '{' || len(stored) >= len(payload) {
		t.Fatalf("stored %d bytes starting %q for a payload of %d", len(stored), stored[:1], len(payload))
	}
	// A row stored before 0011: its payload the JSON text.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id,
		stored_payload, next_attempt_at, created_at, updated_at) VALUES ('payment:old', 'payment.posted', 'ledger', 'o2', 'c',
		'{"amount":"1.00"}', 1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Claim(ctx, now.Add(time.Second), nil, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.EffectKey] = string(r.Payload)
	}
	if got["payment:1"] != string(payload) || got["payment:old"] != `{"amount":"1.00"}` {
		t.Fatalf("claimed payloads %q", got)
	}
	f, err := store.ReadFacts(ctx, s, time.Unix(0, 0), now)
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, e := range f.Enqueued {
		if e.EffectKey == "payment:1" {
			read++
			if e.Amount != "600.00" {
				t.Fatalf("reconcile reads the amount %q from the packed payload, want 600.00", e.Amount)
			}
		}
	}
	if read != 1 {
		t.Fatalf("reconcile read the packed payment %d times", read)
	}
}

// TestABuildBeforePackedPayloadsCannotReadThem: a build of ediwatch from
// before payloads were packed read the column as JSON and would deliver
// packed bytes; after migration 0012 every statement of such a build that
// names the column fails instead (it delivers nothing, loudly).
func TestABuildBeforePackedPayloadsCannotReadThem(t *testing.T) {
	s := newStore(t).(*Store)
	ctx := context.Background()
	for _, q := range []string{
		"SELECT payload FROM outbox",
		`INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id, payload, next_attempt_at,
			created_at, updated_at) VALUES ('k', 'payment.posted', 'ledger', 'o', 'c', '{}', 1, 1, 1)`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "payload") {
			t.Errorf("%s: %v, want an error naming the column", q, err)
		}
	}
}
