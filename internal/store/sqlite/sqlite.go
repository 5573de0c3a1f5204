// Package sqlite is the embedded store driver (modernc.org/sqlite, pure
// Go): one file, WAL, writers serialised with BEGIN IMMEDIATE and a busy
// timeout. It serves a single node with no other infrastructure, and keeps
// the same guarantees as the postgres driver: the same conformance suite
// proves both.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/migrations"
)

// Store is the SQLite driver. It is safe for concurrent use, also by
// several processes on one file.
type Store struct {
	db *sql.DB
	// side is one connection apart from db for the reads a file's parse
	// asks of the store (claim and answer lookups): a write begun during
	// the parse (inbox.Options.PipeFrom) holds a connection of db and waits
	// for the parse, so with every connection of db held by such writes (a
	// pool of one: store.max_conns 1) the parse would wait for them without
	// end. Reads never wait for SQLite's write lock, so the one connection
	// is never held long. (Control numbers are writes: a parse whose write
	// is open takes them through it, inbox.Ingestion.NextControlNumbers.)
	side *sql.DB
	ctl  store.ControlNumbers
	// lockAtBegin: a transaction takes the write lock when it begins
	// (_txlock immediate or exclusive; see ingestion.rowContext).
	lockAtBegin bool
	// wakes are the relays listening on this database (Listen).
	wakes *notifier
}

var _ store.Store = (*Store)(nil)

// Options tune OpenWith.
type Options struct {
	// MaxConns bounds the connection pool (default DefaultMaxConns). SQLite
	// serialises writers whatever the pool size; more connections let
	// readers and waiting writers queue in SQLite's busy handler instead of
	// in the pool.
	MaxConns int
	// DriverName is the database/sql driver (default "sqlite", modernc's):
	// the plan tests register one that records each statement.
	DriverName string
}

// PageSize is the page size of a database the store creates, unless its
// dsn sets one (_pragma=page_size(N)); a database that exists keeps its
// own. Twice SQLite's 4 KiB: an outbox row of a payment is 1.5 to 2 KB,
// of which a 4 KiB page holds two and wastes a fifth, and a large file's
// write, its commit and the checkpoint after it move every page written
// by the hundred thousand (twice per page into the WAL, twice again at
// commit): half the pages, half the calls. PostgreSQL's page is 8 KiB
// too. Measured in the README (Store).
const PageSize = 8192

// createOwnerOnly creates the database file of dsn path ("file:…") empty
// with mode 0600 when it does not exist yet, so that SQLite, which gives
// its WAL and shared-memory files the database's mode, keeps all three
// from other users whatever the process's umask: they hold claims and
// remittances whole. An empty file is an empty database (page size and
// journal mode still unset). A memory database, one opened read-only or
// that must exist (mode=ro, rw), or a path that cannot be created, is
// left to SQLite and its own error.
func createOwnerOnly(path string, q url.Values) {
	name := strings.TrimPrefix(path, "file:")
	if rest, ok := strings.CutPrefix(name, "///"); ok {
		name = "/" + rest
	}
	name, err := url.PathUnescape(name)
	if err != nil || name == "" || strings.HasPrefix(name, ":") || strings.HasPrefix(name, "//") {
		return
	}
	if m := q.Get("mode"); m == "memory" || m == "ro" || m == "rw" {
		return
	}
	if f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	}
}

// DefaultMaxConns is the pool size when Options.MaxConns is not set.
const DefaultMaxConns = 8

// Open opens the database at dsn with default options; see OpenWith.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith opens the database at dsn ("file:ediwatch.db" or a path),
// adding WAL, a busy timeout, immediate transactions, synchronous=FULL
// and, for a database it creates, pages of PageSize bytes, each unless the
// dsn sets it. It does not migrate.
//
// FULL because the poller deletes a file from its drop once its ingest
// committed: in WAL mode, NORMAL does not sync the WAL at commit, so a
// power cut could lose a commit whose file is already gone. A dsn may
// still ask for NORMAL explicitly (_synchronous, _sync or
// _pragma=synchronous(...)); the README gives the measured cost of FULL.
func OpenWith(ctx context.Context, dsn string, opts Options) (*Store, error) {
	path, query, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("sqlite: dsn: %w", err)
	}
	set := func(k, v string, aliases ...string) {
		for _, a := range append(aliases, k) {
			if _, ok := q[a]; ok {
				return
			}
		}
		q.Set(k, v)
	}
	if !pragmaSets(q, "page_size") {
		q.Add("_pragma", fmt.Sprintf("page_size(%d)", PageSize))
	}
	set("_txlock", "immediate")
	set("_busy_timeout", "30000", "_timeout")
	set("_journal_mode", "WAL", "_journal")
	if !pragmaSets(q, "synchronous") {
		set("_synchronous", "FULL", "_sync")
	}
	if !strings.HasPrefix(path, "file:") {
		path = "file:" + path
	}
	createOwnerOnly(path, q)
	if opts.DriverName == "" {
		opts.DriverName = "sqlite"
	}
	db, err := sql.Open(opts.DriverName, path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	db.SetMaxOpenConns(opts.MaxConns)
	// Processes opening a new file at once race to switch it to WAL, which
	// the busy timeout does not cover: retry briefly.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := db.PingContext(ctx)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) || ctx.Err() != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	side, err := sql.Open("sqlite", path+"?"+sideQuery(q).Encode())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	side.SetMaxOpenConns(1)
	txlock := strings.ToLower(q.Get("_txlock"))
	s := &Store{db: db, side: side, lockAtBegin: txlock == "immediate" || txlock == "exclusive",
		wakes: notifierFor(path)}
	s.ctl.Reserve = s.reserveControlNumbers
	return s, nil
}

// sideCacheKiB is the page cache of the side connection, which probes
// keys for a file's parse (claims, answers) and reads each page it needs
// once, in key order: a large file's lookup, run beside its write, kept
// SQLite's default 2 MB of its pages besides the write's own (5 MB of a
// second ingest's peak RSS, measured).
const sideCacheKiB = 256

// sideQuery returns the dsn query of the side connection: q, and a page
// cache of sideCacheKiB unless q sets one (for both connections).
func sideQuery(q url.Values) url.Values {
	if pragmaSets(q, "cache_size") {
		return q
	}
	sq := make(url.Values, len(q)+1)
	for k, v := range q {
		sq[k] = v
	}
	sq["_pragma"] = append(append([]string(nil), q["_pragma"]...), fmt.Sprintf("cache_size(-%d)", sideCacheKiB))
	return sq
}

// pragmaSets reports whether a _pragma parameter of q sets name.
func pragmaSets(q url.Values, name string) bool {
	for _, v := range q["_pragma"] {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), name) {
			return true
		}
	}
	return false
}

// Close closes the database.
func (s *Store) Close() {
	s.side.Close()
	s.db.Close()
}

// DB returns the database, for benchmarks beside the store.
func (s *Store) DB() *sql.DB { return s.db }

func us(t time.Time) int64 { return t.UnixMicro() }

func fromUS(v int64) time.Time { return time.UnixMicro(v).UTC() }

// Migrate applies pending migrations in one immediate transaction, which
// SQLite serialises against every other writer and migrator.
func (s *Store) Migrate(ctx context.Context) error {
	all, err := migrations.Of("sqlite")
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range all {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
			m.Version, m.Name, us(time.Now())); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
	}
	return tx.Commit()
}

type ingestion struct {
	s      *Store
	f      inbox.FileInfo
	tx     *sql.Tx
	result inbox.IngestResult
	done   bool
	// stmts are the statements prepared on tx, each once per ingestion
	// when first used; they close with tx.
	stmts map[string]*sql.Stmt
	// claimed are the [key, content hash] of the sets added as claimed
	// since the last record of another kind, not recorded yet
	// (flushClaimed).
	claimed [][2]string
	// heldAcks are the acknowledgments added while claimed was not
	// empty, in order: each counts the key conflicts of its group, so it
	// is written once the group's claimed sets are recorded, by the same
	// flushClaimed (one statement for many interchanges' claimed sets
	// instead of one for each).
	heldAcks []outbox.Effect
	// wal: the database is in WAL mode, read at begin (see rowContext).
	wal bool
	// conflicts counts the key conflicts recorded so far (sightings of
	// kind conflict): while there is none, no acknowledgment needs
	// conflictsInGroupSQL.
	conflicts int
}

// stmt returns q prepared on the ingestion's transaction.
func (in *ingestion) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := in.stmts[q]; ok {
		return st, nil
	}
	st, err := in.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if in.stmts == nil {
		in.stmts = map[string]*sql.Stmt{}
	}
	in.stmts[q] = st
	return st, nil
}

// exec runs q, prepared once per ingestion, with args (see rowContext).
func (in *ingestion) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := in.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	if ctx, err = in.rowContext(ctx); err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// queryRow runs q, prepared once per ingestion, with args and scans its
// row into dest (see rowContext).
func (in *ingestion) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	st, err := in.stmt(ctx, q)
	if err != nil {
		return err
	}
	if ctx, err = in.rowContext(ctx); err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

// rowContext returns ctx without its cancellation, for one of an
// ingestion's statements, or ctx's error if it is done. The driver watches
// a cancellable context on a goroutine of its own for every statement, a
// large file's write spending more on those than on some of its inserts;
// each statement is a few rows, in a transaction that took the write lock
// when it began, so it has nothing to wait for that a cancellation would
// interrupt. A cancellation still ends the ingestion at its next
// statement, and database/sql rolls its transaction back at once.
//
// Only in WAL mode, with the write lock taken at begin: with a rollback
// journal (a dsn's _journal_mode), a statement whose pages outgrow the
// page cache takes the exclusive lock, and with a deferred begin (a dsn's
// _txlock) the first statement takes the write lock, each waiting in the
// busy handler for other connections, which only a cancellable context
// ends early; ctx is kept there.
func (in *ingestion) rowContext(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !in.wal || !in.s.lockAtBegin {
		return ctx, nil
	}
	return context.WithoutCancel(ctx), nil
}

// ClaimedKeys implements inbox.ClaimLookup. The keys of its answer are
// strings of keys, not copies.
func (s *Store) ClaimedKeys(ctx context.Context, keys []string) (map[string]inbox.Claim, error) {
	out := map[string]inbox.Claim{}
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), 10000)]
		keys = keys[len(chunk):]
		list, err := json.Marshal(chunk)
		if err != nil {
			return nil, err
		}
		want := make(map[string]string, len(chunk))
		for _, k := range chunk {
			want[k] = k
		}
		rows, err := s.side.QueryContext(ctx, `SELECT key, CASE WHEN clean THEN content_hash ELSE '' END
			FROM inbox WHERE status <> 'rejected' AND key IN (SELECT value FROM json_each(?))`, string(list))
		if err != nil {
			return nil, fmt.Errorf("claimed keys: %w", err)
		}
		for rows.Next() {
			var k sql.RawBytes
			var c inbox.Claim
			if err := rows.Scan(&k, &c.CleanHash); err != nil {
				rows.Close()
				return nil, fmt.Errorf("claimed keys: %w", err)
			}
			if key, ok := want[string(k)]; ok {
				out[key] = c
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("claimed keys: %w", err)
		}
	}
	return out, nil
}

// BeginIngest implements inbox.Ingester. The write transaction (BEGIN
// IMMEDIATE) starts at the first write and holds SQLite's write lock until
// Commit or Rollback; the caller has parsed the whole file before.
func (s *Store) BeginIngest(ctx context.Context, f inbox.FileInfo) (inbox.Ingestion, error) {
	return &ingestion{s: s, f: f}, nil
}

func (in *ingestion) begin(ctx context.Context) error {
	if in.tx != nil {
		return nil
	}
	if in.done {
		return errors.New("ingest: already finished")
	}
	tx, err := in.s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ingest: begin: %w", err)
	}
	var mode string
	if err := tx.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		tx.Rollback()
		return fmt.Errorf("ingest: journal mode: %w", err)
	}
	in.tx, in.wal = tx, strings.EqualFold(mode, "wal")
	return nil
}

func (in *ingestion) sighting(ctx context.Context, kind string, r inbox.SetRecord, original string) error {
	f := in.f
	_, err := in.exec(ctx, `INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256,
		correlation_id, original_correlation_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		kind, r.Key, r.ContentHash, f.Source, f.Path, f.SHA256, f.CorrelationID, original, us(f.Now))
	return err
}

func nullable(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// AddSet implements the claim of ediwatch_claim_set (see the postgres
// migration) with the same outcomes; SQLite serialises writers, so the
// steps cannot race.
func (in *ingestion) AddSet(ctx context.Context, r inbox.SetRecord) error {
	if err := in.begin(ctx); err != nil {
		return err
	}
	f := in.f
	status := "processed"
	if r.Rejected {
		status = "rejected"
	}
	res := inbox.SetResult{Key: r.Key, OriginalCorrelationID: f.CorrelationID}
	add := func() {
		in.result.Sets = append(in.result.Sets, res)
	}
	if r.Claimed {
		return in.addClaimed(ctx, r)
	}
	if err := in.flushClaimed(ctx); err != nil {
		return err
	}
	now := us(f.Now)
	ins, err := in.exec(ctx, `INSERT INTO inbox (key, status, content_hash, set_type, reason, summary,
		source, path, file_sha256, correlation_id, created_at, updated_at, key_sans_isa13, clean)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
		r.Key, status, r.ContentHash, r.Type, r.Reason, nullable(r.Summary), f.Source, f.Path, f.SHA256,
		f.CorrelationID, now, now, keySansISA13(r.Key), r.Clean)
	if err != nil {
		return fmt.Errorf("ingest: claim %s: %w", r.Key, err)
	}
	if n, _ := ins.RowsAffected(); n == 0 {
		var exStatus, exHash, exCorr string
		if err := in.queryRow(ctx, selectClaimSQL, []any{r.Key}, &exStatus, &exHash, &exCorr); err != nil {
			return fmt.Errorf("ingest: claim %s: %w", r.Key, err)
		}
		switch {
		case exStatus == "rejected" && (!r.Rejected || exHash != r.ContentHash):
			// A rejection is not processing: the next arrival that
			// processes claims the key, whatever its content hash.
			if _, err := in.exec(ctx, `UPDATE inbox SET status = ?, content_hash = ?, set_type = ?,
				reason = ?, summary = ?, source = ?, path = ?, file_sha256 = ?, correlation_id = ?, created_at = ?,
				updated_at = ?, clean = ? WHERE key = ?`, status, r.ContentHash, r.Type, r.Reason, nullable(r.Summary),
				f.Source, f.Path, f.SHA256, f.CorrelationID, now, now, r.Clean, r.Key); err != nil {
				return fmt.Errorf("ingest: reclaim %s: %w", r.Key, err)
			}
		case exHash == r.ContentHash:
			res.Outcome, res.OriginalCorrelationID = inbox.Duplicate, exCorr
			add()
			return in.sighting(ctx, "duplicate", r, exCorr)
		default:
			res.Outcome, res.OriginalCorrelationID = inbox.Conflict, exCorr
			add()
			in.conflicts++
			return in.sighting(ctx, "conflict", r, exCorr)
		}
	}
	if r.Rejected {
		res.Outcome = inbox.Rejected
		add()
		return nil
	}
	for _, e := range r.Effects {
		key, conflictWith, err := in.insertEffect(ctx, e, r.Key)
		if err != nil {
			return err
		}
		switch {
		case key != "":
			res.EffectKeys = append(res.EffectKeys, key)
		case conflictWith != nil && (len(res.ConflictKeys) == 0 || res.ConflictKeys[len(res.ConflictKeys)-1] != e.Key):
			// One sighting per effect: its rows at several sinks come one
			// after another, and the first in conflict records it.
			if len(res.ConflictKeys) == 0 {
				res.OriginalCorrelationID = *conflictWith
			}
			res.ConflictKeys = append(res.ConflictKeys, e.Key)
			if _, err := in.exec(ctx, `INSERT INTO sighting (kind, key, content_hash, source, path,
				file_sha256, correlation_id, original_correlation_id, created_at)
				VALUES ('effect_conflict', ?, ?, ?, ?, ?, ?, ?, ?)`,
				e.Key, e.Hash, f.Source, f.Path, f.SHA256, f.CorrelationID, *conflictWith, now); err != nil {
				return fmt.Errorf("ingest: effect conflict %s: %w", e.Key, err)
			}
		}
	}
	switch {
	case len(res.ConflictKeys) > 0:
		res.Outcome = inbox.Conflict
		if len(res.EffectKeys) == 0 {
			if _, err := in.exec(ctx, `UPDATE inbox SET status = 'conflict', reason = 'effect conflict'
				WHERE key = ?`, r.Key); err != nil {
				return fmt.Errorf("ingest: claim %s: %w", r.Key, err)
			}
		}
	case len(r.Effects) > 0 && len(res.EffectKeys) == 0:
		res.Outcome = inbox.BusinessDuplicate
		add()
		return in.sighting(ctx, "business_duplicate", r, "")
	default:
		res.Outcome = inbox.Processed
	}
	add()
	return nil
}

const selectClaimSQL = "SELECT status, content_hash, correlation_id FROM inbox WHERE key = ?"

// claimedSQL records consecutive sets added as claimed (without payload),
// given as a JSON array of [key, content hash] pairs: for each whose key
// is claimed, not as a rejection, a duplicate or key conflict sighting of
// the row that claims it, in file order. It returns the sightings; a set
// without one is claimable after all.
const claimedSQL = `INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
	original_correlation_id, created_at)
	SELECT CASE WHEN b.content_hash = json_extract(j.value, '$[1]') THEN 'duplicate' ELSE 'conflict' END,
	       b.key, json_extract(j.value, '$[1]'), ?, ?, ?, ?, b.correlation_id, ?
	FROM json_each(?) AS j JOIN inbox AS b ON b.key = json_extract(j.value, '$[0]')
	WHERE b.status <> 'rejected'
	ORDER BY j.key
	RETURNING key, content_hash, kind, original_correlation_id`

// claimedGroup bounds the sets one claimedSQL records.
const claimedGroup = 1000

// addClaimed adds a set added as claimed to the group recorded by one
// statement before the next record of another kind (flushClaimed).
func (in *ingestion) addClaimed(ctx context.Context, r inbox.SetRecord) error {
	in.claimed = append(in.claimed, [2]string{r.Key, r.ContentHash})
	if len(in.claimed) < claimedGroup {
		return nil
	}
	return in.flushClaimed(ctx)
}

// flushClaimed records the sets added as claimed since the last record of
// another kind: duplicates or key conflicts of the rows that claim their
// keys, or, when one of those rows is gone or a rejection,
// inbox.ErrClaimChanged.
func (in *ingestion) flushClaimed(ctx context.Context) error {
	if len(in.claimed) == 0 {
		return nil
	}
	if err := in.recordClaimed(ctx); err != nil {
		return err
	}
	held := in.heldAcks
	in.heldAcks = nil
	for _, e := range held {
		if err := in.addAck(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// recordClaimed records the sets of in.claimed (flushClaimed).
func (in *ingestion) recordClaimed(ctx context.Context) error {
	group := in.claimed
	in.claimed = nil
	list, err := json.Marshal(group)
	if err != nil {
		return err
	}
	f := in.f
	st, err := in.stmt(ctx, claimedSQL)
	if err != nil {
		return fmt.Errorf("ingest: claims: %w", err)
	}
	rows, err := st.QueryContext(ctx, f.Source, f.Path, f.SHA256, f.CorrelationID, us(f.Now), string(list))
	if err != nil {
		return fmt.Errorf("ingest: claims: %w", err)
	}
	defer rows.Close()
	// The same key and hash twice in a group get the same sighting.
	seen := make(map[[2]string]inbox.SetResult, len(group))
	n := 0
	for rows.Next() {
		var key, hash, kind string
		res := inbox.SetResult{Outcome: inbox.Duplicate}
		if err := rows.Scan(&key, &hash, &kind, &res.OriginalCorrelationID); err != nil {
			return fmt.Errorf("ingest: claims: %w", err)
		}
		if kind == "conflict" {
			res.Outcome = inbox.Conflict
			in.conflicts++
		}
		res.Key = key
		seen[[2]string{key, hash}] = res
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ingest: claims: %w", err)
	}
	for _, g := range group {
		res, ok := seen[g]
		if !ok || n != len(group) {
			return fmt.Errorf("ingest: claim %s: %w", g[0], inbox.ErrClaimChanged)
		}
		in.result.Sets = append(in.result.Sets, res)
	}
	return nil
}

// insertEffect inserts e unless its effect key has a row at its sink or a
// row at any sink with other business content (both hashes known and
// different: an effect conflict, which no sink gets, not even one new to
// the effect's route). It returns the key when inserted; when in
// conflict, the correlation id of the first row of the other content.
//
// The conflict is looked up inside the insert, as a NULL hash that the
// insert's OR IGNORE then skips: a plain single-row insert. As an INSERT …
// SELECT, a trigger or an ON CONFLICT clause beside the lookup, SQLite
// kept a statement journal of every page the insert changed, and a
// statement of its own before the insert cost a first ingest of a large
// file an eighth more CPU time. A row skipped for anything but a conflict
// or its sink's row is an error.
func (in *ingestion) insertEffect(ctx context.Context, e outbox.Effect, inboxKey string) (string, *string, error) {
	now := us(in.f.Now)
	ins, err := in.exec(ctx, `INSERT OR IGNORE INTO outbox (effect_key, kind, sink, ordering_key, inbox_key,
		correlation_id, stored_payload, next_attempt_at, created_at, updated_at, effect_hash)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,
		        CASE WHEN ?11 <> '' AND EXISTS (SELECT 1 FROM outbox WHERE effect_key = ?1 AND effect_hash <> ''
		                                        AND effect_hash <> ?11) THEN NULL ELSE ?11 END)`,
		e.Key, e.Kind, e.Sink, e.OrderingKey, inboxKey, in.f.CorrelationID, e.StoredPayload(), now, now, now,
		e.Hash)
	if err != nil {
		return "", nil, fmt.Errorf("ingest: effect %s: %w", e.Key, err)
	}
	if n, _ := ins.RowsAffected(); n == 1 {
		return e.Key, nil, nil
	}
	var conflictWith sql.NullString
	var atSink bool
	if err := in.queryRow(ctx, `SELECT (SELECT correlation_id FROM outbox WHERE effect_key = ?1 AND ?2 <> ''
		AND effect_hash <> '' AND effect_hash <> ?2 ORDER BY id LIMIT 1),
		EXISTS (SELECT 1 FROM outbox WHERE effect_key = ?1 AND sink = ?3)`, []any{e.Key, e.Hash, e.Sink},
		&conflictWith, &atSink); err != nil {
		return "", nil, fmt.Errorf("ingest: effect %s: %w", e.Key, err)
	}
	switch {
	case conflictWith.Valid:
		return "", &conflictWith.String, nil
	case atSink:
		return "", nil, nil // its sink has it: a business duplicate there
	}
	return "", nil, fmt.Errorf("ingest: effect %s at %s: not inserted, and neither in conflict nor there", e.Key, e.Sink)
}

// conflictsInGroupSQL counts the key conflicts this ingestion recorded in
// a group (by its correlation id and the group's key prefix), through the
// partial index of key conflicts (migration 0015), not every sighting of
// the file: a re-sent file of many one-set groups asks once per group.
const conflictsInGroupSQL = `SELECT count(*) FROM sighting INDEXED BY sighting_conflict
	WHERE kind = 'conflict' AND correlation_id = ? AND substr(key, 1, length(?)) = ?`

func (in *ingestion) AddAck(ctx context.Context, e outbox.Effect) error {
	if err := in.begin(ctx); err != nil {
		return err
	}
	if len(in.claimed) > 0 {
		in.heldAcks = append(in.heldAcks, e)
		return nil
	}
	return in.addAck(ctx, e)
}

// addAck writes e unless it is to be left out for a key conflict of its
// group, once every claimed set before it is recorded.
func (in *ingestion) addAck(ctx context.Context, e outbox.Effect) error {
	if e.UnlessConflictIn != "" && in.conflicts > 0 {
		var conflicts int
		if err := in.queryRow(ctx, conflictsInGroupSQL,
			[]any{in.f.CorrelationID, e.UnlessConflictIn, e.UnlessConflictIn}, &conflicts); err != nil {
			return fmt.Errorf("ingest: ack %s: %w", e.Key, err)
		}
		if conflicts > 0 {
			return nil
		}
	}
	key, _, err := in.insertEffect(ctx, e, "")
	if key != "" {
		in.result.AckKeys = append(in.result.AckKeys, key)
	}
	return err
}

func (in *ingestion) Commit(ctx context.Context, status inbox.FileStatus, lastError string) (*inbox.IngestResult, error) {
	if err := in.begin(ctx); err != nil {
		return nil, err
	}
	if err := in.flushClaimed(ctx); err != nil {
		in.Rollback()
		return nil, err
	}
	defer in.Rollback()
	f := in.f
	now := us(f.Now)
	if !f.Fence.IsZero() {
		// Inside the write transaction, which SQLite serialises against
		// every takeover of the lease.
		var token int64
		err := in.tx.QueryRowContext(ctx, `SELECT token FROM lease WHERE name = ?`, f.Fence.Name).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && token != f.Fence.Token) {
			return nil, fmt.Errorf("ingest: lease %s: %w", f.Fence.Name, store.ErrLeaseLost)
		}
		if err != nil {
			return nil, fmt.Errorf("ingest: fence: %w", err)
		}
	}
	if _, err := in.tx.ExecContext(ctx, parkBehindSQL, behindUS, f.CorrelationID, behindUS); err != nil {
		return nil, fmt.Errorf("ingest: park rows behind others: %w", err)
	}
	if _, err := in.tx.ExecContext(ctx, `INSERT INTO remote_file (source, path, size, mtime, sha256, status,
		last_error, sets, correlation_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (source, path) DO UPDATE SET size = excluded.size, mtime = excluded.mtime,
		sha256 = excluded.sha256, status = excluded.status, last_error = excluded.last_error,
		sets = excluded.sets, post_done = 0, correlation_id = excluded.correlation_id,
		updated_at = excluded.updated_at`,
		f.Source, f.Path, f.Size, us(f.MTime), f.SHA256, string(status), lastError, len(in.result.Sets),
		f.CorrelationID, now, now); err != nil {
		return nil, fmt.Errorf("ingest: ledger: %w", err)
	}
	if injected := store.InjectedCommitFailure(ctx); injected != nil {
		return nil, injected
	}
	if err := in.tx.Commit(); err != nil {
		return nil, fmt.Errorf("ingest: commit: %w", err)
	}
	in.tx = nil
	in.s.wakes.notify()
	return &in.result, nil
}

func (in *ingestion) Rollback() {
	in.done = true
	if in.tx != nil {
		in.tx.Rollback()
		in.tx = nil
	}
}

const outboxCols = `id, effect_key, kind, sink, ordering_key, inbox_key, correlation_id, stored_payload, status,
	attempts, next_attempt_at, coalesce(lease_token, ''), coalesce(lease_expires_at, 0), last_error, last_status,
	created_at, updated_at, coalesce(age_from, created_at), last_response, error_history`

type scanner interface{ Scan(...any) error }

func scanRow(row scanner) (outbox.Row, error) {
	var r outbox.Row
	var payload []byte
	var next, leaseExp, created, updated, ageFrom int64
	err := row.Scan(&r.ID, &r.EffectKey, &r.Kind, &r.Sink, &r.OrderingKey, &r.InboxKey, &r.CorrelationID, &payload,
		&r.Status, &r.Attempts, &next, &r.LeaseToken, &leaseExp, &r.LastError, &r.LastStatus, &created, &updated,
		&ageFrom, &r.LastResponse, &r.ErrorHistory)
	if err == nil {
		// A payload that does not unpack marks its row (the relay
		// dead-letters it) rather than failing the whole claim, which
		// would hold every row claimed with it in flight again and again.
		var perr error
		if r.Payload, perr = outbox.UnpackPayload(payload); perr != nil {
			r.PayloadErr = perr.Error()
		}
	}
	r.NextAttemptAt, r.LeaseExpiresAt, r.CreatedAt, r.UpdatedAt = fromUS(next), fromUS(leaseExp), fromUS(created), fromUS(updated)
	r.AgeFrom = fromUS(ageFrom)
	return r, err
}

func collect(rows *sql.Rows) ([]outbox.Row, error) {
	defer rows.Close()
	var out []outbox.Row
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// Claim implements outbox.Store.
func (s *Store) Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]outbox.Row, error) {
	sinkFilter := ""
	args := []any{store.NewToken(), us(now.Add(lease)), us(now), us(now)}
	if len(sinks) > 0 {
		sinkFilter = " AND o.sink IN (" + placeholders(len(sinks)) + ")"
		for _, sk := range sinks {
			args = append(args, sk)
		}
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, `UPDATE outbox SET status = 'inflight', lease_token = ?, lease_expires_at = ?,
		attempts = attempts + 1, updated_at = ?
		WHERE id IN (SELECT o.id FROM outbox o
			WHERE o.status = 'pending' AND o.next_attempt_at <= ?`+sinkFilter+`
			  AND o.sink NOT IN (SELECT d.sink FROM sink_state d WHERE d.disabled)
			  AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.sink = o.sink AND p.ordering_key = o.ordering_key
			                  AND p.id < o.id AND p.status IN ('pending', 'inflight'))
			ORDER BY o.next_attempt_at, o.id LIMIT ?)
		RETURNING `+outboxCols, args...)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	out, err := collect(rows)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// parkedUS is the next attempt of a disabled sink's pending rows
// (9999-12-31T00:00:00Z): so far ahead that claims, which walk outbox_due
// in due order, never pass them.
const parkedUS = 253402214400000000

// behindUS is the next attempt of a pending row that waits behind an open
// (pending or in-flight) row of its sink and ordering key
// (9999-12-30T00:00:00Z): left out of the claims' walk of outbox_due, so
// that a long queue of one partner's acknowledgments is not walked by
// every claim. An ingest parks its rows that wait so (parkBehindSQL); a
// row that leaves the open states releases the next of its key
// (releaseNextSQL); every lease reap releases any whose turn came in a
// race (sweepBehindSQL). Claims still check the order themselves: the
// parking only saves them the walk.
const behindUS = 253402128000000000

const (
	// parkBehindSQL parks the rows an arrival (by correlation id) made
	// that wait behind an open row of their sink and ordering key.
	parkBehindSQL = `UPDATE outbox SET next_attempt_at = ?
		WHERE correlation_id = ? AND status = 'pending' AND next_attempt_at < ?
		  AND EXISTS (SELECT 1 FROM outbox p WHERE p.sink = outbox.sink AND p.ordering_key = outbox.ordering_key
		              AND p.id < outbox.id AND p.status IN ('pending', 'inflight'))`
	// releaseNextSQL makes due the parked row next after each of the rows
	// listed (a JSON array of ids), which have left the open states.
	releaseNextSQL = `UPDATE outbox SET next_attempt_at = ?
		WHERE status = 'pending' AND next_attempt_at = ? AND id IN (
			SELECT (SELECT min(n.id) FROM outbox n WHERE n.sink = d.sink AND n.ordering_key = d.ordering_key
			        AND n.id > d.id AND n.status IN ('pending', 'inflight'))
			FROM outbox d WHERE d.id IN (SELECT value FROM json_each(?)))`
	// sweepBehindSQL makes due every parked row no open row precedes.
	sweepBehindSQL = `UPDATE outbox SET next_attempt_at = ?
		WHERE status = 'pending' AND next_attempt_at = ?
		  AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.sink = outbox.sink AND p.ordering_key = outbox.ordering_key
		                  AND p.id < outbox.id AND p.status IN ('pending', 'inflight'))`
)

// releaseNext runs releaseNextSQL in tx for the rows ids.
func releaseNext(ctx context.Context, tx *sql.Tx, now time.Time, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, releaseNextSQL, us(now), behindUS, string(list)); err != nil {
		return fmt.Errorf("release the next rows: %w", err)
	}
	return nil
}

// DisableSink implements outbox.SinkStates: one write transaction; a sink
// enabled after sent is left enabled.
func (s *Store) DisableSink(ctx context.Context, sink, reason, by string, now, sent time.Time) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("disable sink: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO sink_state (sink, disabled, since, reason, changed_by) VALUES (?, 1, ?, ?, ?)
		ON CONFLICT (sink) DO UPDATE SET disabled = 1, since = excluded.since, reason = excluded.reason,
			changed_by = excluded.changed_by
		WHERE NOT sink_state.disabled AND sink_state.since <= ?`, sink, us(now), reason, by, us(sent))
	if err != nil {
		return false, fmt.Errorf("disable sink: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE outbox SET next_attempt_at = ? WHERE sink = ? AND status = 'pending'`,
		parkedUS, sink); err != nil {
		return false, fmt.Errorf("disable sink: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("disable sink: %w", err)
	}
	return true, nil
}

// EnableSink implements outbox.SinkStates: one write transaction, which
// wakes this process's listening relays when it commits.
func (s *Store) EnableSink(ctx context.Context, sink string, now time.Time) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE sink_state SET disabled = 0, since = ?, reason = '', changed_by = ''
		WHERE sink = ? AND disabled`, us(now), sink)
	if err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE outbox SET next_attempt_at = ?, age_from = ? WHERE sink = ? AND status = 'pending'`,
		us(now), us(now), sink); err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	s.wakes.notify()
	return true, nil
}

// ParkDisabled implements outbox.SinkStates: one write transaction, so
// it and EnableSink take turns.
func (s *Store) ParkDisabled(ctx context.Context) (int, error) {
	var disabled int
	// Read first, outside a write transaction: most calls find no sink
	// disabled and need not take the write lock.
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sink_state WHERE disabled`).Scan(&disabled); err != nil {
		return 0, fmt.Errorf("park disabled: %w", err)
	}
	if disabled == 0 {
		return 0, nil
	}
	res, err := s.db.ExecContext(ctx, `UPDATE outbox SET next_attempt_at = ?
		WHERE status = 'pending' AND next_attempt_at < ? AND sink IN (SELECT sink FROM sink_state WHERE disabled)`,
		parkedUS, parkedUS)
	if err != nil {
		return 0, fmt.Errorf("park disabled: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// SinkStates implements outbox.SinkStates.
func (s *Store) SinkStates(ctx context.Context) ([]outbox.SinkState, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sink, disabled, since, reason, changed_by FROM sink_state ORDER BY sink`)
	if err != nil {
		return nil, fmt.Errorf("sink states: %w", err)
	}
	defer rows.Close()
	var out []outbox.SinkState
	for rows.Next() {
		var st outbox.SinkState
		var since int64
		if err := rows.Scan(&st.Sink, &st.Disabled, &since, &st.Reason, &st.By); err != nil {
			return nil, fmt.Errorf("sink states: %w", err)
		}
		st.Since = fromUS(since)
		out = append(out, st)
	}
	return out, rows.Err()
}

func (s *Store) fenced(ctx context.Context, q string, args ...any) error {
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrLeaseLost
	}
	return nil
}

// CompleteMany implements outbox.Store: one transaction, one commit.
func (s *Store) CompleteMany(ctx context.Context, done []outbox.Completion, now time.Time) ([]int64, error) {
	if len(done) == 0 {
		return nil, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var updated []int64
	var attempts []outbox.Completion
	for _, c := range done {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET status = 'delivered', lease_token = NULL,
			lease_expires_at = NULL, last_status = ?, last_error = '', delivered_at = ?, updated_at = ?
			WHERE id = ? AND lease_token = ? AND status = 'inflight'`, c.HTTPStatus, us(now), us(now), c.ID, c.Token)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			updated = append(updated, c.ID)
			if c.Attempt != nil {
				attempts = append(attempts, c)
			}
		}
	}
	if err := recordAttempts(ctx, tx, attempts); err != nil {
		return nil, err
	}
	if err := releaseNext(ctx, tx, now, updated...); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return outbox.LostOf(done, updated), nil
}

// ExtendLeases implements outbox.Store: one transaction, one commit.
func (s *Store) ExtendLeases(ctx context.Context, held []outbox.Held, now time.Time, lease time.Duration) ([]int64, error) {
	if len(held) == 0 {
		return nil, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	defer tx.Rollback()
	var lost []int64
	for _, h := range held {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET lease_expires_at = ?
			WHERE id = ? AND lease_token = ? AND status = 'inflight'`, us(now.Add(lease)), h.ID, h.Token)
		if err != nil {
			return nil, fmt.Errorf("extend leases: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			lost = append(lost, h.ID)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	return lost, nil
}

// Retry implements outbox.Store.
func (s *Store) Retry(ctx context.Context, id int64, token string, now, at time.Time, f outbox.Failure) error {
	return s.fencedAttempt(ctx, id, token, now, f.Attempt, nil, false, `UPDATE outbox SET status = 'pending', lease_token = NULL,
		lease_expires_at = NULL, next_attempt_at = ?, last_status = ?, last_error = ?, last_response = ?, updated_at = ?
		WHERE id = ? AND lease_token = ? AND status = 'inflight'`, us(at), f.HTTPStatus, f.Error, f.Response, us(now), id, token)
}

// Dead implements outbox.Store.
func (s *Store) Dead(ctx context.Context, id int64, token string, now time.Time, f outbox.Failure) error {
	return s.fencedAttempt(ctx, id, token, now, f.Attempt, f.DeadEvent, true, `UPDATE outbox SET status = 'dead',
		lease_token = NULL, lease_expires_at = NULL, last_status = ?, last_error = ?, last_response = ?, updated_at = ?,
		deaths = deaths + 1
		WHERE id = ? AND lease_token = ? AND status = 'inflight'`, f.HTTPStatus, f.Error, f.Response, us(now), id, token)
}

// fencedAttempt runs update, an UPDATE of claimed row id fenced by its
// lease token, and in the same transaction records a in the row's attempt
// history (when a is set), inserts ev, a delivery.dead event (when ev is
// set), and, with release (the row leaves the open states), makes the
// next row of its key due; it returns store.ErrLeaseLost when the row
// was not updated.
func (s *Store) fencedAttempt(ctx context.Context, id int64, token string, now time.Time, a *outbox.Attempt,
	ev *outbox.DeadEvent, release bool, update string, args ...any) error {
	if a == nil && ev == nil && !release {
		return s.fenced(ctx, update, args...)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := recordAttempt(ctx, tx, id, token, a); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, update, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrLeaseLost
	}
	if release {
		if err := releaseNext(ctx, tx, now, id); err != nil {
			return err
		}
	}
	if ev != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key,
			correlation_id, stored_payload, next_attempt_at, created_at, updated_at, effect_hash)
			SELECT 'delivery.dead:' || id || ':' || deaths, 'delivery.dead', ?, 'delivery.dead:' || id, '',
				correlation_id, ?, ?, ?, ?, '' FROM outbox WHERE id = ?
			ON CONFLICT (effect_key, sink) DO NOTHING`, ev.Sink, outbox.PackPayload(ev.Payload), us(now), us(now), us(now), id); err != nil {
			return fmt.Errorf("delivery.dead event: %w", err)
		}
	}
	return tx.Commit()
}

// recordAttempt adds a (when set) to the history of row id if the row is
// in flight under token; call it before the transition, in its
// transaction. A trigger (migration 0005) drops the attempts beyond
// outbox.AttemptsKept.
func recordAttempt(ctx context.Context, tx *sql.Tx, id int64, token string, a *outbox.Attempt) error {
	if a == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us, http_status,
		class, error, response_size, response)
		SELECT id, coalesce((SELECT max(seq) FROM outbox_attempt WHERE outbox_id = outbox.id), 0) + 1,
			coalesce(nullif(?, 0), attempts), ?, ?, ?, ?, ?, ?, ?
		FROM outbox WHERE id = ? AND lease_token = ? AND status = 'inflight'`,
		a.Number, us(a.At), a.Latency.Microseconds(), a.HTTPStatus, a.Class, a.Error, a.ResponseSize, a.Response, id, token)
	if err != nil {
		return fmt.Errorf("record attempt: %w", err)
	}
	return nil
}

// recordAttempts adds the attempts of rows just delivered in tx to their
// histories, in statements of up to 500 rows.
func recordAttempts(ctx context.Context, tx *sql.Tx, done []outbox.Completion) error {
	for len(done) > 0 {
		chunk := done[:min(len(done), 500)]
		done = done[len(chunk):]
		args := make([]any, 0, 8*len(chunk))
		for _, c := range chunk {
			a := c.Attempt
			args = append(args, c.ID, us(a.At), a.Latency.Microseconds(), a.HTTPStatus, a.Class, a.Error, a.ResponseSize,
				a.Response)
		}
		values := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?), ", len(chunk)), ", ")
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us,
			http_status, class, error, response_size, response)
			SELECT v.column1, coalesce((SELECT max(seq) FROM outbox_attempt a WHERE a.outbox_id = v.column1), 0) + 1,
				o.attempts, v.column2, v.column3, v.column4, v.column5, v.column6, v.column7, v.column8
			FROM (VALUES `+values+`) v JOIN outbox o ON o.id = v.column1`, args...); err != nil {
			return fmt.Errorf("record attempts: %w", err)
		}
	}
	return nil
}

// Attempts implements outbox.Store.
func (s *Store) Attempts(ctx context.Context, id int64) ([]outbox.Attempt, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, attempt, at, latency_us, http_status, class, error, response_size,
		response FROM outbox_attempt WHERE outbox_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	defer rows.Close()
	var out []outbox.Attempt
	for rows.Next() {
		var a outbox.Attempt
		var at, latency int64
		if err := rows.Scan(&a.Seq, &a.Number, &at, &latency, &a.HTTPStatus, &a.Class, &a.Error, &a.ResponseSize,
			&a.Response); err != nil {
			return nil, fmt.Errorf("attempts: %w", err)
		}
		a.At, a.Latency = fromUS(at), time.Duration(latency)*time.Microsecond
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	return out, nil
}

// Snooze implements outbox.Store.
func (s *Store) Snooze(ctx context.Context, id int64, token string, now, at time.Time) error {
	return s.fenced(ctx, `UPDATE outbox SET status = 'pending', lease_token = NULL, lease_expires_at = NULL,
		next_attempt_at = ?, attempts = max(attempts - 1, 0), updated_at = ?
		WHERE id = ? AND lease_token = ? AND status = 'inflight'`, us(at), us(now), id, token)
}

// GiveBack implements outbox.Store.
func (s *Store) GiveBack(ctx context.Context, id int64, token string, now, at time.Time, a *outbox.Attempt) error {
	return s.fencedAttempt(ctx, id, token, now, a, nil, false, `UPDATE outbox SET status = 'pending', lease_token = NULL,
		lease_expires_at = NULL, next_attempt_at = ?, attempts = max(attempts - 1, 0), updated_at = ?
		WHERE id = ? AND lease_token = ? AND status = 'inflight'`, us(at), us(now), id, token)
}

// ReapExpired implements outbox.Store.
// The parked rows whose turn has come are released too (sweepBehindSQL).
func (s *Store) ReapExpired(ctx context.Context, now time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE outbox SET status = 'pending', lease_token = NULL,
		lease_expires_at = NULL, next_attempt_at = ?, updated_at = ?
		WHERE status = 'inflight' AND lease_expires_at < ?`, us(now), us(now), us(now))
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if _, err := s.db.ExecContext(ctx, sweepBehindSQL, us(now), behindUS); err != nil {
		return int(n), fmt.Errorf("release parked rows: %w", err)
	}
	return int(n), nil
}

// ListDead implements outbox.Store.
func (s *Store) ListDead(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error) {
	where, args := deadWhere(f, nil)
	rows, err := s.db.QueryContext(ctx, `SELECT `+outboxCols+` FROM outbox WHERE `+where+` ORDER BY id LIMIT ?`,
		append(args, limit)...)
	if err != nil {
		return nil, err
	}
	return collect(rows)
}

// briefCols are outboxCols without the payload and the last response.
var briefCols = strings.NewReplacer("stored_payload,", "'' AS stored_payload,", "last_response,", "'' AS last_response,").Replace(outboxCols)

// ListDeadBrief implements outbox.Store.
func (s *Store) ListDeadBrief(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error) {
	where, args := deadWhere(f, nil)
	rows, err := s.db.QueryContext(ctx, `SELECT `+briefCols+` FROM outbox WHERE `+where+` ORDER BY id LIMIT ?`,
		append(args, limit)...)
	if err != nil {
		return nil, err
	}
	return collect(rows)
}

// CountDead implements outbox.Store.
func (s *Store) CountDead(ctx context.Context, f outbox.DeadFilter) (int, error) {
	var n int
	if f.Counted() {
		err := s.db.QueryRowContext(ctx, outbox.DeadCountSQL("?1"), f.Sink).Scan(&n)
		return n, err
	}
	where, args := deadWhere(f, nil)
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE `+where, args...).Scan(&n)
	return n, err
}

// deadWhere returns the condition selecting the dead rows f selects, and
// args with its parameters appended.
func deadWhere(f outbox.DeadFilter, args []any) (string, []any) {
	where := "status = 'dead'"
	if len(f.IDs) > 0 {
		list, ids := idList(f.IDs)
		where += " AND id IN " + list
		args = append(args, ids...)
	}
	if f.Sink != "" {
		where += " AND sink = ?"
		args = append(args, f.Sink)
	}
	if f.Kind != "" {
		where += " AND kind = ?"
		args = append(args, f.Kind)
	}
	if !f.Since.IsZero() {
		where += " AND updated_at >= ?"
		args = append(args, us(f.Since))
	}
	if !f.Until.IsZero() {
		where += " AND updated_at < ?"
		args = append(args, us(f.Until))
	}
	if f.Passed {
		where += " AND " + outbox.PassedSQL
	}
	return where, args
}

// GetOutbox implements outbox.Store.
func (s *Store) GetOutbox(ctx context.Context, id int64) (outbox.Row, error) {
	r, err := scanRow(s.db.QueryRowContext(ctx, `SELECT `+outboxCols+` FROM outbox WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

func idList(ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return "(" + placeholders(len(ids)) + ")", args
}

// Replay implements outbox.Store.
func (s *Store) Replay(ctx context.Context, f outbox.DeadFilter, now time.Time) (int, error) {
	where, args := deadWhere(f, []any{us(now), us(now), us(now), now.UTC().Format("2006-01-02T15:04:05Z")})
	res, err := s.db.ExecContext(ctx, `UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = ?,
		age_from = ?, updated_at = ?,
		error_history = substr(error_history || ? || ' replayed after ' || attempts || ' attempts; last error: '
			|| last_error || char(10), -`+strconv.Itoa(historyMax)+`)
		WHERE `+where, args...)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// historyMax bounds error_history (characters; the oldest lines go first).
const historyMax = 4096

// Discard implements outbox.Store.
func (s *Store) Discard(ctx context.Context, f outbox.DeadFilter, now time.Time) (int, error) {
	where, args := deadWhere(f, []any{us(now)})
	res, err := s.db.ExecContext(ctx, `UPDATE outbox SET status = 'discarded', updated_at = ? WHERE `+where, args...)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Stats implements outbox.Store.
// statsSQL counts the rows of each sink still to deliver (from
// outbox_open alone, whatever the delivered history holds) and reads its
// dead rows' count from outbox_dead_count.
const statsSQL = `SELECT sink, sum(pending), sum(inflight), sum(dead), coalesce(min(oldest), ?)
	FROM (SELECT sink, status = 'pending' AS pending, status = 'inflight' AS inflight, 0 AS dead, created_at AS oldest
	      FROM outbox WHERE status IN ('pending', 'inflight')
	      UNION ALL
	      SELECT sink, 0, 0, n, NULL FROM outbox_dead_count WHERE n > 0)
	GROUP BY sink ORDER BY sink`

func (s *Store) Stats(ctx context.Context, now time.Time) ([]outbox.SinkStats, error) {
	rows, err := s.db.QueryContext(ctx, statsSQL, us(now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outbox.SinkStats
	for rows.Next() {
		var st outbox.SinkStats
		var oldest int64
		if err := rows.Scan(&st.Sink, &st.Pending, &st.Inflight, &st.Dead, &oldest); err != nil {
			return nil, err
		}
		st.OldestPending = max(0, now.Sub(fromUS(oldest)))
		out = append(out, st)
	}
	return out, rows.Err()
}

// AcquireLease implements store.Leases.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (int64, bool, error) {
	var token int64
	err := s.db.QueryRowContext(ctx, `INSERT INTO lease (name, holder, token, expires_at) VALUES (?, ?, 1, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
		token = CASE WHEN lease.holder = excluded.holder AND lease.expires_at >= ? THEN lease.token
		             ELSE lease.token + 1 END
		WHERE lease.holder = excluded.holder OR lease.expires_at < ?
		RETURNING token`, name, holder, us(now.Add(ttl)), us(now), us(now)).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// ReleaseLease implements store.Leases.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string, token int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE lease SET expires_at = 0 WHERE name = ? AND holder = ? AND token = ?`,
		name, holder, token)
	return err
}

// CheckLease implements store.Leases. SQLite serves one node, whose clock
// is the caller's.
func (s *Store) CheckLease(ctx context.Context, f inbox.Fence, now time.Time) error {
	var expires int64
	err := s.db.QueryRowContext(ctx, `SELECT expires_at FROM lease WHERE name = ? AND token = ?`, f.Name, f.Token).Scan(&expires)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && expires < us(now)) {
		return fmt.Errorf("lease %s: %w", f.Name, store.ErrLeaseLost)
	}
	return err
}

// NextControlNumber implements store.Store (see store.ControlNumbers).
func (s *Store) NextControlNumber(ctx context.Context, sender string) (int64, error) {
	return s.ctl.Next(ctx, sender)
}

// reserveControlNumbers advances sender's sequence by n: the block
// store.ControlNumbers hands out.
func (s *Store) reserveControlNumbers(ctx context.Context, sender string, n int64) (int64, error) {
	var end int64
	err := s.db.QueryRowContext(ctx, reserveControlNumbers, sender, n, n).Scan(&end)
	return end, err
}

const reserveControlNumbers = `INSERT INTO control_number (sender, next) VALUES (?, 1 + ?)
	ON CONFLICT (sender) DO UPDATE SET next = control_number.next + ?
	RETURNING next`

// NextControlNumbers implements inbox.Ingestion: numbers of the block
// this process holds, else n reserved in the ingestion's transaction (the
// store's own reservation would wait for the write lock this ingestion
// holds), so that a rollback takes them back; those left unused once it
// has committed come back through KeepControlNumbers.
func (in *ingestion) NextControlNumbers(ctx context.Context, sender string, n int64) (int64, int64, error) {
	if first, end, ok := in.s.ctl.TryTake(sender, n); ok {
		return first, end, nil
	}
	var end int64
	if err := in.tx.QueryRowContext(ctx, reserveControlNumbers, sender, n, n).Scan(&end); err != nil {
		return 0, 0, fmt.Errorf("control number: %w", err)
	}
	return end - n, end, store.InRange(sender, end-1)
}

// KeepControlNumbers implements store.Store.
func (s *Store) KeepControlNumbers(sender string, next, end int64) { s.ctl.Keep(sender, next, end) }

// ControlNumbersBesideIngestions implements store.Store: a reservation
// waits for the write lock an ingestion holds.
func (s *Store) ControlNumbersBesideIngestions() bool { return false }

// FileStates implements inbox.Ledger.
func (s *Store) FileStates(ctx context.Context, source string, paths []string) (map[string]inbox.FileState, error) {
	list, err := json.Marshal(paths)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT path, size, mtime, sha256, status, attempts, last_error, post_done, updated_at
		FROM remote_file WHERE source = ? AND path IN (SELECT value FROM json_each(?))`, source, string(list))
	if err != nil {
		return nil, fmt.Errorf("file states: %w", err)
	}
	defer rows.Close()
	out := make(map[string]inbox.FileState, len(paths))
	for rows.Next() {
		var p, status string
		var f inbox.FileState
		var mtime, updated int64
		if err := rows.Scan(&p, &f.Size, &mtime, &f.SHA256, &status, &f.Attempts, &f.LastError, &f.PostDone, &updated); err != nil {
			return nil, err
		}
		f.Status, f.MTime, f.UpdatedAt = inbox.FileStatus(status), fromUS(mtime), fromUS(updated)
		out[p] = f
	}
	return out, rows.Err()
}

// RecordFileProblem implements inbox.Ledger.
func (s *Store) RecordFileProblem(ctx context.Context, f inbox.FileInfo, status inbox.FileStatus, lastError string) (inbox.FileState, error) {
	var st inbox.FileState
	var sts string
	var mtime, updated int64
	err := s.db.QueryRowContext(ctx, `INSERT INTO remote_file (source, path, size, mtime, sha256, status, attempts,
		last_error, correlation_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
		ON CONFLICT (source, path) DO UPDATE SET status = excluded.status, last_error = excluded.last_error,
		sha256 = excluded.sha256,
		attempts = CASE WHEN remote_file.size = excluded.size AND remote_file.mtime = excluded.mtime
		                THEN remote_file.attempts + 1 ELSE 1 END,
		size = excluded.size, mtime = excluded.mtime, correlation_id = excluded.correlation_id,
		updated_at = excluded.updated_at
		RETURNING size, mtime, sha256, status, attempts, last_error, post_done, updated_at`,
		f.Source, f.Path, f.Size, us(f.MTime), f.SHA256, string(status), lastError, f.CorrelationID, us(f.Now), us(f.Now)).Scan(
		&st.Size, &mtime, &st.SHA256, &sts, &st.Attempts, &st.LastError, &st.PostDone, &updated)
	st.Status, st.MTime, st.UpdatedAt = inbox.FileStatus(sts), fromUS(mtime), fromUS(updated)
	return st, err
}

// lastFileTimesSQL pins store.LastFileTimesSQL's every probe to
// remote_file_source_recorded: left to choose, SQLite reads every
// recorded file through the index by status for the first max(source),
// 20 ms at 100,000 files where a probe of the index by source takes
// microseconds.
var lastFileTimesSQL = strings.ReplaceAll(store.LastFileTimesSQL, "remote_file r",
	"remote_file r INDEXED BY remote_file_source_recorded")

// LastFileTimes returns, per source, when its newest file was recorded
// (ingested or rejected): the silence alarm's reading (poller.Silence).
func (s *Store) LastFileTimes(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.db.QueryContext(ctx, lastFileTimesSQL)
	if err != nil {
		return nil, fmt.Errorf("last file times: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var src string
		var at int64
		if err := rows.Scan(&src, &at); err != nil {
			return nil, fmt.Errorf("last file times: %w", err)
		}
		out[src] = fromUS(at)
	}
	return out, rows.Err()
}

// MarkPostDone implements inbox.Ledger. updated_at stays the file's
// ingest: moving an old file is no new file (LastFileTimes).
func (s *Store) MarkPostDone(ctx context.Context, source, path string, _ time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE remote_file SET post_done = 1 WHERE source = ? AND path = ?`,
		source, path)
	return err
}

// Prune implements store.Store.
func (s *Store) Prune(ctx context.Context, before time.Time, batch int) (int, error) {
	total, err := store.DeleteInBatches([]string{
		`DELETE FROM inbox WHERE key IN (SELECT key FROM inbox WHERE created_at < ? LIMIT ?)`,
		`DELETE FROM sighting WHERE id IN (SELECT id FROM sighting WHERE created_at < ? LIMIT ?)`,
		`DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE status IN ('delivered', 'discarded')
			AND updated_at < ? LIMIT ?)`,
		`DELETE FROM remote_file WHERE (source, path) IN (SELECT source, path FROM remote_file
			WHERE updated_at < ? AND post_done = 1 LIMIT ?)`,
	}, batch, func(q string) (int64, error) {
		res, err := s.db.ExecContext(ctx, q, us(before), batch)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
	if err != nil {
		return total, err
	}
	// The rollups of days that ended before the cutoff: one a day.
	res, err := s.db.ExecContext(ctx, `DELETE FROM reconcile_day WHERE day < ?`, dayText(before))
	if err != nil {
		return total, err
	}
	n, err := res.RowsAffected()
	return total + int(n), err
}

// PrunePayloads implements store.Store. Each batch is a transaction of
// its own, so a pass holds SQLite's write lock for one batch at a time.
func (s *Store) PrunePayloads(ctx context.Context, before time.Time, batch int) (int, error) {
	total := 0
	for {
		n, err := s.prunePayloadBatch(ctx, before, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune payloads: %w", err)
		}
		if n < batch {
			return total, nil
		}
	}
}

func (s *Store) prunePayloadBatch(ctx context.Context, before time.Time, batch int) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id, stored_payload FROM outbox
		WHERE status IN ('delivered', 'discarded') AND payload_pruned = 0 AND updated_at < ?
		ORDER BY updated_at LIMIT ?`, us(before), batch)
	if err != nil {
		return 0, err
	}
	type pruned struct {
		id      int64
		residue []byte
	}
	var due []pruned
	for rows.Next() {
		var id int64
		var p []byte
		if err := rows.Scan(&id, &p); err != nil {
			rows.Close()
			return 0, err
		}
		due = append(due, pruned{id, outbox.PayloadResidue(p)})
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(due) == 0 {
		return 0, err
	}
	for _, p := range due {
		if _, err := tx.ExecContext(ctx, `UPDATE outbox SET stored_payload = ?, payload_pruned = 1, `+store.SlimPrunedSQL+`
			WHERE id = ?`,
			p.residue, p.id); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM outbox_attempt WHERE outbox_id = ?`, p.id); err != nil {
			return 0, err
		}
	}
	return len(due), tx.Commit()
}

// The row counts Counts reads.
const (
	countInboxSQL     = "SELECT status, count(*) FROM inbox GROUP BY status"
	countSightingsSQL = "SELECT kind, count(*) FROM sighting GROUP BY kind"
	countOutboxSQL    = "SELECT status, count(*) FROM outbox GROUP BY status"
	countFilesSQL     = "SELECT status, count(*) FROM remote_file GROUP BY status"
)

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) (store.Counts, error) {
	return store.CollectCounts(store.CountQueries{Inbox: countInboxSQL, Sightings: countSightingsSQL,
		Outbox: countOutboxSQL, Files: countFilesSQL}, func(q string) (store.Rows, func(), error) {
		r, err := s.db.QueryContext(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		return r, func() { r.Close() }, nil
	})
}
