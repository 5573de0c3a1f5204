// Package postgres is the PostgreSQL store driver (pgx/v5): production,
// and any number of ediwatch replicas on one database. Unique constraints
// decide every race; outbox claims use FOR UPDATE SKIP LOCKED; a whole
// small file is ingested in one pipelined round trip.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/golang/snappy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ediwatch/ediwatch/internal/backoff"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/migrations"
)

// Store is the PostgreSQL driver. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// side is one connection apart from pool for what a file's parse asks
	// of the store while its write, begun during the parse
	// (inbox.Options.PipeFrom), holds a connection of pool and waits for
	// the parse: control number reservations and answer lookups. Each is
	// one short statement that waits for no lock another holds long, so a
	// pool taken whole by such writes (and LISTEN) cannot stall the parses
	// they wait for.
	side *pgxpool.Pool
	ctl  store.ControlNumbers
	// raced holds the correlation ids of ingestions rolled back as
	// transient; written again, they claim one set at a time.
	raced racedIngests
	// listenCheck is Options.ListenCheck.
	listenCheck time.Duration
	// listenCfg, when set, is Options.ListenDSN's: LISTEN connects there.
	listenCfg *pgx.ConnConfig
}

// racedIngests is a set of correlation ids of ingestions rolled back as
// transient: by a unique violation (a run of sets found none of its keys
// claimed, and a concurrent transaction claimed one and committed while
// the run waited for it) or by a deadlock with another ingest (the next
// write may meet a run of it again). Every later write of such a file
// claims its sets one at a time (ediwatch_claim_set), which waits for a
// concurrent claim and then sees it, so that a file colliding on every write with the ingests of
// overlapping files (three at once do this) still commits, as every write
// did before runs were claimed set-based, instead of failing once its
// writes are used up.
type racedIngests struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

// maxRaced bounds racedIngests: an id whose file is not written again
// (its last write raced) is forgotten with the others past it, which at
// worst lets a later write of those files race again.
const maxRaced = 1024

func (r *racedIngests) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil || len(r.ids) >= maxRaced {
		r.ids = map[string]struct{}{}
	}
	r.ids[id] = struct{}{}
}

// has reports whether id raced.
func (r *racedIngests) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok
}

// forget forgets id (its file committed).
func (r *racedIngests) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ids, id)
}

var _ store.Store = (*Store)(nil)

// Options tune Open.
type Options struct {
	// Schema, when set, is the schema every connection uses (search_path);
	// it is created if missing. Tests isolate themselves with it.
	Schema string
	// MaxConns bounds the pool (default pgxpool's).
	MaxConns int32
	// ListenCheck is how long the LISTEN connection may stay quiet before
	// Listen checks that it still answers (default 30s; a check waits as
	// long): a connection a failover stranded is then left for a new one.
	ListenCheck time.Duration
	// Tracer, when set, is told of every statement the pool runs (pgx's
	// QueryTracer). The plan tests record statements with it.
	Tracer pgx.QueryTracer
	// StatementTimeout, when set, is every statement's statement_timeout:
	// the server cancels a statement that runs longer (SQLSTATE 57014).
	StatementTimeout time.Duration
	// ListenDSN, when set, is where the LISTEN connection that wakes the
	// relays goes: a direct connection to the primary when DSN names a
	// pooler in transaction mode (PgBouncer), through which a LISTEN
	// hears nothing. Without it, behind such a pooler, relays find new
	// rows at their next idle poll (relay.idle) instead of at once.
	ListenDSN string
	// OnFailover, when set, is told (on a goroutine of its own) when a new
	// connection reaches another server than the last one did, or than
	// the store recorded before this process: a standby promoted by a
	// failover (the next timeline) or another cluster. The store records
	// each server it reaches (migration 0019).
	OnFailover func(old, new ServerIdentity)
}

// Open connects to url. It does not migrate.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse dsn: %w", redact(err))
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	if opts.OnFailover != nil {
		w := &identityWatch{onChange: opts.OnFailover}
		cfg.AfterConnect = w.afterConnect
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", redact(err))
	}
	if opts.Schema != "" {
		if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{opts.Schema}.Sanitize()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: create schema: %w", err)
		}
	}
	sideCfg := cfg.Copy()
	sideCfg.MaxConns, sideCfg.MinConns = 1, 0
	side, err := pgxpool.NewWithConfig(ctx, sideCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", redact(err))
	}
	s := &Store{pool: pool, side: side, listenCheck: opts.ListenCheck}
	if opts.ListenDSN != "" {
		lc, err := pgx.ParseConfig(opts.ListenDSN)
		if err != nil {
			pool.Close()
			side.Close()
			return nil, fmt.Errorf("postgres: parse listen dsn: %w", redact(err))
		}
		if opts.Schema != "" {
			lc.RuntimeParams["search_path"] = opts.Schema
		}
		s.listenCfg = lc
	}
	s.ctl.Reserve = s.reserveControlNumbers
	return s, nil
}

// redact drops connection strings (which may hold a password) from an error.
// A parse error quotes the whole DSN, which pgx redacts only where it
// recognises a password (not "password = x" nor a missing "="): only
// what follows the quoted DSN is kept.
func redact(err error) error {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			return errors.New(msg[i+len("`: "):])
		}
		return errors.New("the connection string does not parse")
	}
	if i := strings.Index(msg, "postgres://"); i >= 0 {
		return errors.New(msg[:i] + "postgres://[redacted]")
	}
	return err
}

// Close closes the pool.
func (s *Store) Close() {
	s.pool.Close()
	if s.side != nil {
		s.side.Close()
	}
}

// Pool returns the connection pool, for benchmarks beside the store.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ReadOnly reports whether the store's sessions refuse writes: a server
// in recovery (a standby the DSN reached) or default_transaction_read_only
// set for the role, database or DSN. Such a store answers every read and
// commits nothing.
func (s *Store) ReadOnly(ctx context.Context) (bool, error) {
	var v string
	if err := s.pool.QueryRow(ctx, "SHOW transaction_read_only").Scan(&v); err != nil {
		return false, fmt.Errorf("transaction_read_only: %w", err)
	}
	return v == "on", nil
}

// migrationLock is the advisory lock key serialising concurrent migrators.
const migrationLock = 7_143_201_955

// Migrate applies the pending embedded migrations in one transaction under
// an advisory lock, so concurrent starts are safe.
func (s *Store) Migrate(ctx context.Context) error {
	all, err := migrations.Of("postgres")
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range all {
		if slices.Contains(applied, m.Version) {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
	}
	return tx.Commit(ctx)
}

// ingestion batches a file's statements: a small file goes to the server
// in one pipelined batch that runs as one implicit transaction; a file
// whose batch grows past flushAt opens an explicit transaction and sends
// batches as they fill.
type ingestion struct {
	s      *inbox.FileInfo
	st     *Store
	batch  *pgx.Batch
	queued []queued
	bytes  int
	conn   *pgxpool.Conn
	tx     pgx.Tx
	result inbox.IngestResult
	done   bool
	// parked counts the rows the commit parked behind others (parkBehindSQL).
	parked int64
	// records counts the sets and acknowledgments added since the last
	// batch was sent (claimed sets count by the statement recording them).
	records int
	// inflight, while a batch runs in the background, receives its
	// outcome (maybeFlush).
	inflight chan error
	// claimedKeys and claimedHashes are the sets added as claimed since the
	// last record of another kind, not queued yet (queueClaimed).
	claimedKeys, claimedHashes []string
	// sets are the sets added (not as claimed) since the last record of
	// another kind, not queued yet (queueSets).
	sets setRun
	// heldAcks are the acknowledgments added while sets or claimed sets
	// waited, in order: each checks the key conflicts of its group, so it
	// is queued once the sets before it are (queueHeldAcks), and a file
	// of many small groups still claims its sets in runs of setsPerRun.
	heldAcks []outbox.Effect
	// oneByOne: a previous write of this file was rolled back as
	// transient (racedIngests); its sets are claimed one at a time.
	oneByOne bool
}

type queued struct {
	kind string // sets, claimed, ack, park, exec
	key  string
	// claimed: the keys and content hashes of consecutive sets added as
	// claimed, recorded by one statement; sets: the keys of consecutive
	// sets claimed by one ediwatch_claim_sets (or ediwatch_claim_set).
	keys, hashes []string
}

// A large file's batches: one runs while the next is queued, so two are
// in memory at once with their encoded form. 200 sets (about 0.5 MB of
// payloads) take as long as 500 did, in 15-20 MB less peak memory for a
// 124 MB file.
const (
	flushAtBytes = 1 << 20
	flushAtRows  = 200
)

// BeginIngest implements inbox.Ingester.
func (s *Store) BeginIngest(ctx context.Context, f inbox.FileInfo) (inbox.Ingestion, error) {
	return &ingestion{s: &f, st: s, batch: &pgx.Batch{}, oneByOne: s.raced.has(f.CorrelationID)}, nil
}

// claimSetsSQL claims a run of consecutive sets (ediwatch_claim_sets,
// migration 0013): one row per set, in order.
const claimSetsSQL = `SELECT n, outcome, original_correlation_id, inserted, conflicts FROM ediwatch_claim_sets(
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`

// claimSetSQL claims one set (ediwatch_claim_set, migration 0013).
const claimSetSQL = `SELECT 1, outcome, original_correlation_id, inserted, conflicts FROM ediwatch_claim_set(
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`

// setRun is a run of consecutive sets as ediwatch_claim_sets takes them:
// per set, and per effect in set order (effectSets: its set's position,
// from 1), payloads packed (outbox.PackPayload).
type setRun struct {
	keys, hashes, types, statuses, reasons []string
	summaries                              []*string
	keysSansISA13                          []string
	cleans                                 []bool
	effectSets                             []int32
	kinds, effectKeys, orderingKeys, sinks []string
	effectHashes                           []string
	payloads                               [][]byte
	// arena holds the packed payloads, in chunks of up to packChunk
	// bytes: one allocation for many payloads rather than one (of the
	// largest size packing may take) per payload.
	arena []byte
}

// packChunk is the largest arena chunk of packed payloads.
const packChunk = 256 << 10

// pack returns p packed (outbox.PackPayload), stored in the run's arena.
func (run *setRun) pack(p []byte) []byte {
	need := 1 + snappy.MaxEncodedLen(len(p))
	if cap(run.arena)-len(run.arena) < need {
		// Chunks double up to packChunk: a small file's run of one set
		// takes no more than its payload needs.
		run.arena = make([]byte, 0, max(need, min(packChunk, 2*cap(run.arena))))
	}
	start := len(run.arena)
	run.arena = outbox.AppendPackedPayload(run.arena, p)
	return run.arena[start:len(run.arena):len(run.arena)]
}

// add appends r and returns the bytes it adds to the batch.
func (run *setRun) add(r inbox.SetRecord) int {
	status := "processed"
	if r.Rejected {
		status = "rejected"
	}
	var summary *string
	if len(r.Summary) > 0 {
		sum := string(r.Summary)
		summary = &sum
	}
	run.keys = append(run.keys, r.Key)
	run.hashes = append(run.hashes, r.ContentHash)
	run.types = append(run.types, r.Type)
	run.statuses = append(run.statuses, status)
	run.reasons = append(run.reasons, validText(r.Reason))
	run.summaries = append(run.summaries, summary)
	run.keysSansISA13 = append(run.keysSansISA13, keySansISA13(r.Key))
	run.cleans = append(run.cleans, r.Clean)
	n := 2*len(r.Key) + len(r.ContentHash) + len(r.Type) + len(r.Reason) + len(r.Summary) + 60
	for _, e := range r.Effects {
		run.effectSets = append(run.effectSets, int32(len(run.keys)))
		run.kinds = append(run.kinds, validText(e.Kind))
		run.effectKeys = append(run.effectKeys, validText(e.Key))
		run.orderingKeys = append(run.orderingKeys, validText(e.OrderingKey))
		run.sinks = append(run.sinks, validText(e.Sink))
		run.effectHashes = append(run.effectHashes, validText(e.Hash))
		packed := e.Packed // the ingest's spill keeps payloads packed
		if packed == nil {
			packed = run.pack(e.Payload)
		}
		run.payloads = append(run.payloads, packed)
		n += len(packed) + len(e.Key) + len(e.OrderingKey) + len(e.Kind) + len(e.Sink) + len(e.Hash) + 40
	}
	return n
}

// setsPerRun bounds the sets one ediwatch_claim_sets claims.
const setsPerRun = flushAtRows

func (in *ingestion) AddSet(ctx context.Context, r inbox.SetRecord) error {
	if r.Claimed {
		return in.addClaimed(ctx, r)
	}
	in.queueClaimed()
	in.bytes += in.sets.add(r)
	in.records++
	if len(in.sets.keys) >= setsPerRun {
		in.queueSets()
	}
	return in.maybeFlush(ctx)
}

// queueSets queues the statement claiming the sets added since the last
// record of another kind, if any, then the acknowledgments held behind
// them.
func (in *ingestion) queueSets() {
	in.queueSetRun()
	in.queueHeldAcks()
}

func (in *ingestion) queueSetRun() {
	run := &in.sets
	if len(run.keys) == 0 {
		return
	}
	f := in.s
	if in.oneByOne && len(run.keys) > 1 {
		first := 0
		for i := range run.keys {
			last := first
			for last < len(run.effectSets) && int(run.effectSets[last]) == i+1 {
				last++
			}
			in.batch.Queue(claimSetSQL, run.keys[i], run.hashes[i], run.types[i], run.statuses[i], run.reasons[i],
				run.summaries[i], f.Source, f.Path, f.SHA256, f.CorrelationID, f.Now, run.kinds[first:last],
				run.effectKeys[first:last], run.orderingKeys[first:last], run.sinks[first:last],
				run.payloads[first:last], run.effectHashes[first:last], run.keysSansISA13[i], run.cleans[i])
			in.queued = append(in.queued, queued{kind: "sets", keys: run.keys[i : i+1]})
			first = last
		}
		in.sets = setRun{}
		return
	}
	if len(run.keys) == 1 {
		// One set (a small file's): the function of one set, which does
		// without the run's probes and set-based statements.
		in.batch.Queue(claimSetSQL, run.keys[0], run.hashes[0], run.types[0], run.statuses[0], run.reasons[0],
			run.summaries[0], f.Source, f.Path, f.SHA256, f.CorrelationID, f.Now, run.kinds, run.effectKeys,
			run.orderingKeys, run.sinks, run.payloads, run.effectHashes, run.keysSansISA13[0], run.cleans[0])
		in.queued = append(in.queued, queued{kind: "sets", keys: run.keys})
		in.sets = setRun{}
		return
	}
	in.batch.Queue(claimSetsSQL, run.keys, run.hashes, run.types, run.statuses, run.reasons, run.summaries,
		run.keysSansISA13, f.Source, f.Path, f.SHA256, f.CorrelationID, f.Now, run.effectSets, run.kinds, run.effectKeys,
		run.orderingKeys, run.sinks, run.payloads, run.effectHashes, run.cleans)
	in.queued = append(in.queued, queued{kind: "sets", keys: run.keys})
	in.sets = setRun{}
}

// claimedSQL records consecutive sets added as claimed (without payload),
// given as arrays of keys ($1) and content hashes ($2): for each, a
// duplicate or key conflict sighting of the row that claims its key, which
// it locks as ediwatch_claim_set does, in file order. It returns those rows
// by position in the arrays; a position missing, or a rejection, means
// that set is claimable after all.
const claimedSQL = `WITH input AS (
		SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(key, hash, n)),
	locked AS (
		SELECT i.n, i.key, i.hash, b.status, b.content_hash, b.correlation_id
		FROM input i JOIN inbox b ON b.key = i.key ORDER BY i.n FOR UPDATE OF b),
	seen AS (
		INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
		                      original_correlation_id, created_at)
		SELECT CASE WHEN content_hash = hash THEN 'duplicate' ELSE 'conflict' END, key, hash, $3, $4, $5, $6,
		       correlation_id, $7
		FROM locked WHERE status <> 'rejected' ORDER BY n)
	SELECT n, status, content_hash, correlation_id FROM locked ORDER BY n`

// claimedGroup bounds the sets one claimedSQL records.
const claimedGroup = 1000

// addClaimed adds a set added as claimed to the group queued as one
// statement before the next other record. Its verification is read back
// after the statement ran, so it runs in an explicit transaction that
// ErrClaimChanged rolls back, never in the implicit one of a single batch.
func (in *ingestion) addClaimed(ctx context.Context, r inbox.SetRecord) error {
	if err := in.beginTx(ctx); err != nil {
		return err
	}
	in.queueSets()
	in.claimedKeys = append(in.claimedKeys, r.Key)
	in.claimedHashes = append(in.claimedHashes, r.ContentHash)
	in.bytes += len(r.Key) + len(r.ContentHash) + 100
	if len(in.claimedKeys) < claimedGroup {
		return nil
	}
	in.queueClaimed()
	return in.maybeFlush(ctx)
}

// queueClaimed queues the statement recording the sets added as claimed
// since the last record of another kind, if any, then the
// acknowledgments held behind them.
func (in *ingestion) queueClaimed() {
	if len(in.claimedKeys) == 0 {
		return
	}
	f := in.s
	in.batch.Queue(claimedSQL, in.claimedKeys, in.claimedHashes, f.Source, f.Path, f.SHA256, f.CorrelationID, f.Now)
	in.queued = append(in.queued, queued{kind: "claimed", keys: in.claimedKeys, hashes: in.claimedHashes})
	in.records++
	in.claimedKeys, in.claimedHashes = nil, nil
	in.queueHeldAcks()
}

// queueHeldAcks queues the held acknowledgments once no set added before
// them waits to be queued.
func (in *ingestion) queueHeldAcks() {
	if len(in.sets.keys) > 0 || len(in.claimedKeys) > 0 {
		return
	}
	held := in.heldAcks
	in.heldAcks = nil
	for _, e := range held {
		in.queueAck(e)
	}
}

// beginTx opens the ingestion's explicit transaction, if not yet open.
func (in *ingestion) beginTx(ctx context.Context) error {
	if in.tx != nil {
		return nil
	}
	conn, err := in.st.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	in.conn = conn
	if in.tx, err = conn.Begin(ctx); err != nil {
		return fmt.Errorf("ingest: begin: %w", err)
	}
	if _, err := in.tx.Exec(ctx, lz4SQL); err != nil {
		return fmt.Errorf("ingest: begin: %w", err)
	}
	return nil
}

// lz4SQL makes the transaction compress what it stores out of line (the
// payloads of a large file) with lz4 where the server has it: pglz, the
// default, took as long as parsing the JSON. Reading is the same for
// either method.
const lz4SQL = `SELECT set_config('default_toast_compression', 'lz4', true) FROM pg_settings
	WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)`

// claimedKeysSQL returns the keys of $1 claimed other than as a
// rejection: one probe of the key's index per key, whatever the size of
// the inbox. Not key = ANY($1): on a table not yet analysed the planner
// may scan it comparing every row with the whole array; not a plain join
// either: given the array's length, the planner hashes the whole inbox
// (measured twice the time of the probes at 60,000 rows, and it grows with
// the inbox).
const claimedKeysSQL = `SELECT k.key, i.clean_hash FROM unnest($1::text[]) AS k(key)
	CROSS JOIN LATERAL (SELECT CASE WHEN i.clean THEN i.content_hash ELSE '' END AS clean_hash
	                      FROM inbox i WHERE i.key = k.key AND i.status <> 'rejected' LIMIT 1) AS i`

// ClaimedKeys implements inbox.ClaimLookup. The keys of its answer are
// strings of keys, not copies.
func (s *Store) ClaimedKeys(ctx context.Context, keys []string) (map[string]inbox.Claim, error) {
	out := map[string]inbox.Claim{}
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), 10000)]
		keys = keys[len(chunk):]
		want := make(map[string]string, len(chunk))
		for _, k := range chunk {
			want[k] = k
		}
		// On the side connection: the file's ingestion, which may hold
		// the pool's last connection, waits for these answers.
		rows, err := s.side.Query(ctx, claimedKeysSQL, chunk)
		if err != nil {
			return nil, fmt.Errorf("claimed keys: %w", err)
		}
		for rows.Next() {
			v := rows.RawValues()
			if key, ok := want[string(v[0])]; ok {
				out[key] = inbox.Claim{CleanHash: string(v[1])}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("claimed keys: %w", err)
		}
	}
	return out, nil
}

// validText returns s with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as the effects' JSON encoding did before they were
// passed as arrays (PostgreSQL refuses invalid text).
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

const ackSQL = `INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload_packed,
	next_attempt_at, created_at, updated_at, effect_hash)
	SELECT $1, $2, $3, $4, '', $5, $6, $7, $7, $7, $9
	WHERE $8 = '' OR NOT EXISTS (SELECT 1 FROM sighting WHERE kind = 'conflict' AND correlation_id = $5
	                             AND substr(key, 1, length($8)) = $8)
	ON CONFLICT (effect_key, sink) DO NOTHING RETURNING effect_key`

// NextControlNumbers implements inbox.Ingestion: one of the store's own,
// from the process's block or a reservation on the connection apart from
// the pool (Store.side), which never waits for this ingestion: its
// transaction does not touch control_number
// (ControlNumbersBesideIngestions).
func (in *ingestion) NextControlNumbers(ctx context.Context, sender string, _ int64) (int64, int64, error) {
	n, err := in.st.NextControlNumber(ctx, sender)
	return n, n + 1, err
}

func (in *ingestion) AddAck(ctx context.Context, e outbox.Effect) error {
	if len(in.sets.keys) > 0 || len(in.claimedKeys) > 0 {
		in.heldAcks = append(in.heldAcks, e)
		return nil
	}
	in.queueAck(e)
	return in.maybeFlush(ctx)
}

// queueAck queues e's row unless its group has a key conflict.
func (in *ingestion) queueAck(e outbox.Effect) {
	packed := e.StoredPayload()
	in.batch.Queue(ackSQL, e.Key, e.Kind, e.Sink, e.OrderingKey, in.s.CorrelationID, packed, in.s.Now,
		e.UnlessConflictIn, e.Hash)
	in.queued = append(in.queued, queued{kind: "ack", key: e.Key})
	in.records++
	in.bytes += len(packed) + 200
}

// maybeFlush sends the queued statements once they are many. The batch
// runs while the caller queues the next ones: its outcome is collected
// before the next batch is sent, and by Commit and Rollback.
func (in *ingestion) maybeFlush(ctx context.Context) error {
	if in.bytes < flushAtBytes && in.records < flushAtRows {
		return nil
	}
	in.queueSets()
	in.records = 0
	if err := in.wait(); err != nil {
		return err
	}
	if err := in.beginTx(ctx); err != nil {
		return err
	}
	batch, queued := in.batch, in.queued
	in.batch, in.queued, in.bytes = &pgx.Batch{}, nil, 0
	done := make(chan error, 1)
	in.inflight = done
	go func() {
		br := in.tx.SendBatch(ctx, batch)
		err := in.read(br, queued)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		done <- in.failed(err)
	}()
	return nil
}

// wait returns the outcome of the batch in flight, if any. Until it
// returns, the transaction and in.result belong to that batch.
func (in *ingestion) wait() error {
	if in.inflight == nil {
		return nil
	}
	err := <-in.inflight
	in.inflight = nil
	return err
}

// readClaimed collects the results of a claimedSQL.
func (in *ingestion) readClaimed(br pgx.BatchResults, q queued) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("ingest: claims: %w", err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var n int64
		var status, hash string
		r := inbox.SetResult{Outcome: inbox.Duplicate}
		if err := rows.Scan(&n, &status, &hash, &r.OriginalCorrelationID); err != nil {
			return fmt.Errorf("ingest: claims: %w", err)
		}
		if n != int64(i+1) || status == "rejected" {
			break // set i is not claimed as it was looked up
		}
		r.Key = q.keys[i]
		if hash != q.hashes[i] {
			r.Outcome = inbox.Conflict
		}
		in.result.Sets = append(in.result.Sets, r)
		i++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ingest: claims: %w", err)
	}
	if i < len(q.keys) {
		return fmt.Errorf("ingest: claim %s: %w", q.keys[i], inbox.ErrClaimChanged)
	}
	return nil
}

// readSets collects the results of a claimSetsSQL: one row per set.
func (in *ingestion) readSets(br pgx.BatchResults, q queued) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("ingest: claim %s: %w", q.keys[0], err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var n int32
		var r inbox.SetResult
		var outcome string
		if err := rows.Scan(&n, &outcome, &r.OriginalCorrelationID, &r.EffectKeys, &r.ConflictKeys); err != nil {
			return fmt.Errorf("ingest: claim %s: %w", q.keys[min(i, len(q.keys)-1)], err)
		}
		if int(n) != i+1 || i >= len(q.keys) {
			return fmt.Errorf("ingest: claim %s: result %d out of order", q.keys[min(i, len(q.keys)-1)], n)
		}
		r.Key, r.Outcome = q.keys[i], outcomeOf(outcome)
		if r.OriginalCorrelationID == in.s.CorrelationID {
			// A new claim's own: one string for all of them, not one
			// kept per set of a large file.
			r.OriginalCorrelationID = in.s.CorrelationID
		}
		in.result.Sets = append(in.result.Sets, r)
		i++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ingest: claim %s: %w", q.keys[min(i, len(q.keys)-1)], err)
	}
	if i != len(q.keys) {
		return fmt.Errorf("ingest: claim %s: no result", q.keys[i])
	}
	return nil
}

// read collects the results of the queued statements, in order.
func (in *ingestion) read(br pgx.BatchResults, queued []queued) error {
	for _, q := range queued {
		switch q.kind {
		case "sets":
			if err := in.readSets(br, q); err != nil {
				return err
			}
		case "claimed":
			if err := in.readClaimed(br, q); err != nil {
				return err
			}
		case "ack":
			var key string
			switch err := br.QueryRow().Scan(&key); {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return fmt.Errorf("ingest: ack %s: %w", q.key, err)
			default:
				in.result.AckKeys = append(in.result.AckKeys, key)
			}
		case "park":
			tag, err := br.Exec()
			if err != nil {
				return fmt.Errorf("ingest: %s: %w", q.key, err)
			}
			in.parked = tag.RowsAffected()
		case "exec":
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("ingest: %s: %w", q.key, err)
			}
		}
	}
	return nil
}

// outcomeOf returns the Outcome constant spelled s, so that a large file's
// results share its few strings rather than keep one scanned per set.
func outcomeOf(s string) inbox.Outcome {
	for _, o := range []inbox.Outcome{inbox.Processed, inbox.Duplicate, inbox.BusinessDuplicate, inbox.Conflict, inbox.Rejected} {
		if string(o) == s {
			return o
		}
	}
	return inbox.Outcome(s)
}

const ledgerSQL = `INSERT INTO remote_file (source, path, size, mtime, sha256, status, last_error, sets,
	correlation_id, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
	ON CONFLICT (source, path) DO UPDATE SET size = excluded.size, mtime = excluded.mtime,
	sha256 = excluded.sha256, status = excluded.status, last_error = excluded.last_error,
	sets = excluded.sets, post_done = false, correlation_id = excluded.correlation_id,
	updated_at = excluded.updated_at`

func (in *ingestion) Commit(ctx context.Context, status inbox.FileStatus, lastError string) (*inbox.IngestResult, error) {
	if in.done {
		return nil, errors.New("ingest: already finished")
	}
	in.done = true
	if err := in.wait(); err != nil {
		in.release()
		return nil, err
	}
	in.queueClaimed()
	in.queueSets()
	f := in.s
	sets := len(in.result.Sets)
	for _, q := range in.queued {
		switch q.kind {
		case "sets", "claimed":
			sets += len(q.keys)
		}
	}
	if !f.Fence.IsZero() {
		// Same transaction as every write: a replica whose directory lease
		// passed to another commits nothing.
		in.batch.Queue("SELECT ediwatch_check_fence($1, $2)", f.Fence.Name, f.Fence.Token)
		in.queued = append(in.queued, queued{kind: "exec", key: "fence"})
	}
	in.batch.Queue(parkBehindSQL, f.CorrelationID)
	in.queued = append(in.queued, queued{kind: "park", key: "park rows behind others"})
	in.batch.Queue(ledgerSQL, f.Source, f.Path, f.Size, f.MTime, f.SHA256, string(status), lastError, sets,
		f.CorrelationID, f.Now)
	in.queued = append(in.queued, queued{kind: "exec", key: "ledger"})
	// Relays listening are woken when the transaction commits (a NOTIFY
	// in a transaction is delivered at commit, never on rollback).
	in.batch.Queue("SELECT pg_notify($1, '')", NotifyChannel)
	in.queued = append(in.queued, queued{kind: "exec", key: "notify"})
	injected := store.InjectedCommitFailure(ctx)
	if injected != nil {
		// Every write is queued; this fails the transaction before commit.
		in.batch.Queue("SELECT 1/0")
		in.queued = append(in.queued, queued{kind: "exec", key: "injected failure"})
	}
	var err error
	if in.tx == nil {
		// One round trip: the batch runs as one implicit transaction.
		br := in.st.pool.SendBatch(ctx, in.batch)
		err = in.read(br, in.queued)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	} else {
		br := in.tx.SendBatch(ctx, in.batch)
		err = in.read(br, in.queued)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = in.tx.Commit(ctx)
		}
		in.release()
	}
	if injected != nil && err != nil {
		return nil, injected
	}
	if err != nil {
		return nil, in.failed(err)
	}
	if in.oneByOne {
		in.st.raced.forget(f.CorrelationID)
	}
	if in.parked > 0 {
		// A row parked behind one whose delivery committed while this
		// ingest ran was not seen by that delivery's release: made due
		// now, with a snapshot that sees both commits (the sweep of the
		// next lease reap, should this fail).
		in.st.pool.Exec(context.WithoutCancel(ctx), unparkMineSQL, f.CorrelationID, f.Now)
	}
	return &in.result, nil
}

// failed is ingestErr(err), remembering a transient failure (racedIngests)
// so that the file's later writes claim its sets one at a time.
func (in *ingestion) failed(err error) error {
	err = ingestErr(err)
	if errors.Is(err, store.ErrTransient) {
		in.st.raced.add(in.s.CorrelationID)
	}
	return err
}

func (in *ingestion) release() {
	if in.tx != nil {
		in.tx.Rollback(context.Background())
		in.tx = nil
	}
	if in.conn != nil {
		in.conn.Release()
		in.conn = nil
	}
}

func (in *ingestion) Rollback() {
	in.done = true
	in.wait() // its outcome no longer matters; the connection does
	in.release()
}

// payloadCol is an outbox row's payload as stored: packed
// (outbox.PackPayload) since migration 0011, else the jsonb of a row stored
// before, as its text; outbox.UnpackPayload reads either.
const payloadCol = `coalesce(payload_packed, convert_to(payload_json::text, 'UTF8'))`

const outboxCols = `id, effect_key, kind, sink, ordering_key, inbox_key, correlation_id, ` + payloadCol + `, status,
	attempts, next_attempt_at, coalesce(lease_token, ''), coalesce(lease_expires_at, 'epoch'), last_error,
	last_status, created_at, updated_at, coalesce(age_from, created_at), last_response, error_history`

func scanRow(row pgx.Row) (outbox.Row, error) {
	var r outbox.Row
	var payload []byte
	err := row.Scan(&r.ID, &r.EffectKey, &r.Kind, &r.Sink, &r.OrderingKey, &r.InboxKey, &r.CorrelationID, &payload,
		&r.Status, &r.Attempts, &r.NextAttemptAt, &r.LeaseToken, &r.LeaseExpiresAt, &r.LastError, &r.LastStatus,
		&r.CreatedAt, &r.UpdatedAt, &r.AgeFrom, &r.LastResponse, &r.ErrorHistory)
	if err == nil {
		// A payload that does not unpack marks its row (the relay
		// dead-letters it) rather than failing the whole claim, which
		// would hold every row claimed with it in flight again and again.
		var perr error
		if r.Payload, perr = outbox.UnpackPayload(payload); perr != nil {
			r.PayloadErr = perr.Error()
		}
	}
	return r, err
}

func collect(rows pgx.Rows) ([]outbox.Row, error) {
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

// NotifyChannel is the channel an ingest notifies when it commits.
const NotifyChannel = "ediwatch_outbox"

// Listen calls wake whenever an ingest commits, until ctx is cancelled. It
// holds one connection, and reconnects with backoff when it drops; a wake
// is sent after each reconnect, since notifications may have been missed.
// onError, when set, is told why the connection dropped and when Listen
// reconnects.
func (s *Store) Listen(ctx context.Context, wake func(), onError func(err error, retryIn time.Duration)) error {
	for failures := 1; ctx.Err() == nil; failures++ {
		listened, err := s.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return nil
		}
		if listened {
			failures = 1 // a connection that listened was a success: back off from the start
		}
		delay := backoff.Capped(100*time.Millisecond, 10*time.Second, failures)
		if onError != nil {
			onError(err, delay)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
	return nil
}

// listenOnce listens on one connection until it fails; listened reports
// whether LISTEN took. A connection quiet for listenCheck must answer a
// ping within listenCheck, or it is closed and listenOnce fails: a
// failover can strand it (nothing answers, nothing closes it).
func (s *Store) listenOnce(ctx context.Context, wake func()) (listened bool, err error) {
	check := s.listenCheck
	if check <= 0 {
		check = 30 * time.Second
	}
	conn, release, err := s.listenConn(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	// bounded runs f within d, past ctx's end when after is set.
	bounded := func(d time.Duration, after bool, f func(ctx context.Context) error) error {
		parent := ctx
		if after {
			parent = context.WithoutCancel(ctx)
		}
		bctx, cancel := context.WithTimeout(parent, d)
		defer cancel()
		return f(bctx)
	}
	drop := func() { // it may be stranded: closed, not back to the pool
		bounded(time.Second, true, conn.Close)
	}
	if err := bounded(check, false, func(bctx context.Context) error {
		_, err := conn.Exec(bctx, "LISTEN "+NotifyChannel)
		return err
	}); err != nil {
		drop()
		return false, err
	}
	defer func() {
		if err := bounded(min(check, 5*time.Second), true, func(bctx context.Context) error {
			_, err := conn.Exec(bctx, "UNLISTEN "+NotifyChannel)
			return err
		}); err != nil {
			drop()
		}
	}()
	wake()
	for {
		wctx, cancel := context.WithTimeout(ctx, check)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			wake()
			continue
		case ctx.Err() != nil:
			return true, err
		case !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err):
			return true, err
		}
		if err := bounded(check, false, conn.Ping); err != nil {
			drop()
			return true, fmt.Errorf("listen connection quiet for %s does not answer: %w", check, err)
		}
	}
}

// listenConn returns the connection to LISTEN on and what gives it back:
// a connection of its own to Options.ListenDSN when set (a pooler in
// transaction mode, such as PgBouncer, cannot carry a LISTEN), else one
// of the pool.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, func(), error) {
	if s.listenCfg == nil {
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		return pc.Conn(), pc.Release, nil
	}
	c, err := pgx.ConnectConfig(ctx, s.listenCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("store.listen_dsn: %w", redact(err))
	}
	return c, func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.Close(cctx)
	}, nil
}

// Claim implements outbox.Store.
func (s *Store) Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]outbox.Row, error) {
	// The order check is a scalar subquery, probing outbox_open_by_order
	// by ordering key, sink and id: as NOT EXISTS, PostgreSQL planned it as
	// an anti join that walked every open row for each due row whenever
	// its statistics saw few open rows (at a year of history with 1,500
	// open rows, 13 ms a claim instead of 0.4, a tenth of the deliveries).
	//
	// The sink filter is written so that no index can serve it: the
	// planner must walk outbox_due in due order, never fetch every open row
	// of the sinks and sort them (as it would with "sink = ANY(...)" and
	// stale statistics, e.g. after a burst of inserts).
	//
	// Disabled sinks are left out of the same filter: the array of the
	// listed sinks less the disabled ones is an uncorrelated subquery,
	// evaluated once per claim. "IS NOT NULL" keeps the planner's default
	// estimate that the filter passes nearly every row; an "IS NULL" test
	// is estimated to pass 0.5% of them, and with a backlog the planner
	// then sorts every due row (measured: a third of the deliveries per
	// second in BenchmarkRelayVsPgbench). A claim of every sink (no list;
	// the relay always lists its sinks) uses that slower form.
	sinkFilter := "AND array_position(" + disabledSinksSQL + ", o.sink) IS NULL"
	args := []any{now, limit, store.NewToken(), now.Add(lease)}
	if len(sinks) > 0 {
		sinkFilter = `AND array_position(ARRAY(SELECT l.sink FROM unnest($5::text[]) AS l(sink)
			WHERE l.sink NOT IN (SELECT d.sink FROM sink_state d WHERE d.disabled)), o.sink) IS NOT NULL`
		args = append(args, sinks)
	}
	rows, err := s.pool.Query(ctx, `WITH due AS (
		SELECT o.id FROM outbox o
		WHERE o.status = 'pending' AND o.next_attempt_at <= $1 `+sinkFilter+`
		  AND (SELECT p.id FROM outbox p WHERE p.ordering_key = o.ordering_key AND p.sink = o.sink
		       AND p.status IN ('pending', 'inflight') AND p.id < o.id
		       ORDER BY p.ordering_key, p.sink, p.id LIMIT 1) IS NULL
		ORDER BY o.next_attempt_at, o.id
		LIMIT $2
		FOR UPDATE SKIP LOCKED)
	UPDATE outbox SET status = 'inflight', lease_token = $3, lease_expires_at = $4,
		attempts = outbox.attempts + 1, updated_at = $1
	FROM due WHERE outbox.id = due.id
	RETURNING outbox.`+outboxCols, args...)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	out, err := collect(rows)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// disabledSinksSQL is the array of disabled sinks: an uncorrelated
// subquery, evaluated once per claim (an InitPlan).
const disabledSinksSQL = `(SELECT coalesce(array_agg(d.sink), '{}') FROM sink_state d WHERE d.disabled)`

// parkedSQL is the next attempt of a disabled sink's pending rows: so far
// ahead that claims, which walk outbox_due in due order, never pass them.
const parkedSQL = `'9999-12-31T00:00:00Z'::timestamptz`

// behindSQL is the next attempt of a pending row that waits behind an
// open (pending or in-flight) row of its sink and ordering key: left out
// of the claims' walk of outbox_due, so that a long queue of one
// partner's acknowledgments is not walked by every claim. An ingest parks
// its rows that wait so (parkBehindSQL); a row that leaves the open states
// releases the next of its key once that commits (releaseAfterSQL), and an
// ingest that parked rows looks at them again once it committed
// (unparkMineSQL): between the two, a delivery and an ingest committing
// side by side under READ COMMITTED never both miss a row. Every lease
// reap releases any left by a process that died between the two steps
// (sweepBehindSQL).
// Claims still check the order themselves: the parking only saves them
// the walk.
const behindSQL = `'9999-12-30T00:00:00Z'::timestamptz`

const (
	// parkBehindSQL parks the rows an arrival (by correlation id) made
	// that wait behind an open row of their sink and ordering key.
	//
	// The statements are shaped so that the planner keeps to
	// outbox_correlation and outbox_open_by_order whatever its statistics
	// say (a fresh table has none): a materialized lookup by correlation
	// id, and probes ordered as outbox_open_by_order is, written as scalar
	// subqueries: PostgreSQL turns an EXISTS into a semi or anti join,
	// dropping its ORDER BY and LIMIT, and may then walk the whole index
	// of open rows for every row (see Claim); and the rows to change are
	// named as an array, found by primary key: joined to the lookup, the
	// update was planned as a loop over every parked row probing each of
	// the arrival's (2,000 sets and 200 parked rows: 400,000 probes, half
	// a second at a year of history, 1 ms now). Planned from the
	// predicates alone, with the table not analyzed yet, a 20,000-file
	// backlog walked every open row of the sink per row parked (polls of
	// 14 s, the ingest holding its ordering key's lock meanwhile).
	parkBehindSQL = `WITH mine AS MATERIALIZED (SELECT id, sink, ordering_key FROM outbox WHERE correlation_id = $1
			AND status = 'pending' AND next_attempt_at < ` + behindSQL + `)
		UPDATE outbox o SET next_attempt_at = ` + behindSQL + `
		WHERE o.id = ANY(ARRAY(SELECT m.id FROM mine m
			WHERE (SELECT p.id FROM outbox p WHERE p.ordering_key = m.ordering_key AND p.sink = m.sink
			       AND p.status IN ('pending', 'inflight') AND p.id < m.id
			       ORDER BY p.ordering_key, p.sink, p.id LIMIT 1) IS NOT NULL))
		  AND o.status = 'pending' AND o.next_attempt_at < ` + behindSQL
	// sweepBehindSQL makes due every parked row no open row precedes.
	sweepBehindSQL = `UPDATE outbox o SET next_attempt_at = $1
		WHERE o.status = 'pending' AND o.next_attempt_at = ` + behindSQL + `
		  AND (SELECT p.id FROM outbox p WHERE p.ordering_key = o.ordering_key AND p.sink = o.sink
		       AND p.status IN ('pending', 'inflight') AND p.id < o.id
		       ORDER BY p.ordering_key, p.sink, p.id LIMIT 1) IS NULL`
)

// releaseAfterSQL makes due the parked row that heads the sink and
// ordering key of each row listed ($1), rows that have left the open
// states: run after the transaction that moved them committed, so that
// its snapshot sees every ingest that committed before (an ingest that
// commits later sees the move, unparkMineSQL).
const releaseAfterSQL = `UPDATE outbox o SET next_attempt_at = $2
	FROM (SELECT (SELECT n.id FROM outbox n WHERE n.ordering_key = d.ordering_key AND n.sink = d.sink
	              AND n.status IN ('pending', 'inflight')
	              ORDER BY n.ordering_key, n.sink, n.id LIMIT 1) AS id
	      FROM outbox d WHERE d.id = ANY($1::bigint[])) x
	WHERE o.id = x.id AND o.status = 'pending' AND o.next_attempt_at = ` + behindSQL

// unparkMineSQL makes due the rows an arrival ($1) parked that no open
// row precedes any more: run after its commit.
const unparkMineSQL = `WITH mine AS MATERIALIZED (SELECT id, sink, ordering_key FROM outbox WHERE correlation_id = $1
		AND status = 'pending' AND next_attempt_at = ` + behindSQL + `)
	UPDATE outbox o SET next_attempt_at = $2
	WHERE o.id = ANY(ARRAY(SELECT m.id FROM mine m
		WHERE (SELECT p.id FROM outbox p WHERE p.ordering_key = m.ordering_key AND p.sink = m.sink
		       AND p.status IN ('pending', 'inflight') AND p.id < m.id
		       ORDER BY p.ordering_key, p.sink, p.id LIMIT 1) IS NULL))
	  AND o.status = 'pending' AND o.next_attempt_at = ` + behindSQL

// releaseAfter runs releaseAfterSQL for ids at now. Its failure is not the
// caller's: the move committed, and the next lease reap's sweep makes the
// rows due.
func (s *Store) releaseAfter(ctx context.Context, now time.Time, ids ...int64) {
	if len(ids) > 0 {
		s.pool.Exec(context.WithoutCancel(ctx), releaseAfterSQL, ids, now)
	}
}

// DisableSink implements outbox.SinkStates. The sink_state row is written
// first, so concurrent disables and enables of one sink take turns; a
// sink enabled after sent is left enabled.
func (s *Store) DisableSink(ctx context.Context, sink, reason, by string, now, sent time.Time) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("disable sink: %w", err)
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, `INSERT INTO sink_state (sink, disabled, since, reason, changed_by) VALUES ($1, true, $2, $3, $4)
		ON CONFLICT (sink) DO UPDATE SET disabled = true, since = excluded.since, reason = excluded.reason,
			changed_by = excluded.changed_by
		WHERE NOT sink_state.disabled AND sink_state.since <= $5`, sink, now, reason, by, sent)
	if err != nil {
		return false, fmt.Errorf("disable sink: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE outbox SET next_attempt_at = `+parkedSQL+`
		WHERE sink = $1 AND status = 'pending'`, sink); err != nil {
		return false, fmt.Errorf("disable sink: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("disable sink: %w", err)
	}
	return true, nil
}

// EnableSink implements outbox.SinkStates; the NOTIFY an ingest sends
// wakes listening relays when it commits.
func (s *Store) EnableSink(ctx context.Context, sink string, now time.Time) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, `UPDATE sink_state SET disabled = false, since = $2, reason = '', changed_by = ''
		WHERE sink = $1 AND disabled`, sink, now)
	if err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE outbox SET next_attempt_at = $2, age_from = $2
		WHERE sink = $1 AND status = 'pending'`, sink, now); err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, '')", NotifyChannel); err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("enable sink: %w", err)
	}
	return true, nil
}

// ParkDisabled implements outbox.SinkStates. It locks the disabled
// sinks' sink_state rows first, as EnableSink does, so an enable waits for
// it or it sees the enable.
func (s *Store) ParkDisabled(ctx context.Context) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("park disabled: %w", err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `SELECT sink FROM sink_state WHERE disabled ORDER BY sink FOR UPDATE`)
	if err != nil {
		return 0, fmt.Errorf("park disabled: %w", err)
	}
	sinks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(sinks) == 0 {
		return 0, err
	}
	tag, err := tx.Exec(ctx, `UPDATE outbox SET next_attempt_at = `+parkedSQL+`
		WHERE status = 'pending' AND next_attempt_at < `+parkedSQL+` AND sink = ANY($1)`, sinks)
	if err != nil {
		return 0, fmt.Errorf("park disabled: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("park disabled: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// SinkStates implements outbox.SinkStates.
func (s *Store) SinkStates(ctx context.Context) ([]outbox.SinkState, error) {
	rows, err := s.pool.Query(ctx, `SELECT sink, disabled, since, reason, changed_by FROM sink_state ORDER BY sink`)
	if err != nil {
		return nil, fmt.Errorf("sink states: %w", err)
	}
	defer rows.Close()
	var out []outbox.SinkState
	for rows.Next() {
		var st outbox.SinkState
		if err := rows.Scan(&st.Sink, &st.Disabled, &st.Since, &st.Reason, &st.By); err != nil {
			return nil, fmt.Errorf("sink states: %w", err)
		}
		st.Since = st.Since.UTC()
		out = append(out, st)
	}
	return out, rows.Err()
}

func (s *Store) fenced(ctx context.Context, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return store.ErrLeaseLost
	}
	return nil
}

// CompleteMany implements outbox.Store: one statement marks the rows
// delivered and records their attempts.
func (s *Store) CompleteMany(ctx context.Context, done []outbox.Completion, now time.Time) ([]int64, error) {
	if len(done) == 0 {
		return nil, nil
	}
	n := len(done)
	ids, tokens, statuses := make([]int64, n), make([]string, n), make([]int32, n)
	ats, latencies, classes, errs, sizes, responses := make([]time.Time, n), make([]int64, n), make([]string, n),
		make([]string, n), make([]int64, n), make([]string, n)
	for i, c := range done {
		ids[i], tokens[i], statuses[i] = c.ID, c.Token, int32(c.HTTPStatus)
		if a := c.Attempt; a != nil {
			ats[i], latencies[i], classes[i], errs[i], sizes[i], responses[i] = a.At, a.Latency.Microseconds(), a.Class,
				a.Error, a.ResponseSize, a.Response
		} else {
			ats[i] = now
		}
	}
	// Rows without an attempt to record carry class ''.
	rows, err := s.pool.Query(ctx, `WITH c AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[],
			$5::timestamptz[], $6::bigint[], $7::text[], $8::text[], $9::bigint[], $10::text[])
			AS c(id, token, status, at, latency_us, class, error, size, response)),
		u AS (UPDATE outbox SET status = 'delivered', lease_token = NULL, lease_expires_at = NULL,
			last_status = c.status, last_error = '', delivered_at = $4, updated_at = $4
			FROM c WHERE outbox.id = c.id AND outbox.lease_token = c.token AND outbox.status = 'inflight'
			RETURNING outbox.id, outbox.attempts),
		h AS (SELECT u.id, u.attempts, c.at, c.latency_us, c.status, c.class, c.error, c.size, c.response,
			coalesce((SELECT max(a.seq) FROM outbox_attempt a WHERE a.outbox_id = u.id), 0) AS last
			FROM u JOIN c ON c.id = u.id WHERE c.class <> ''),
		ins AS (INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us, http_status, class, error,
			response_size, response)
			SELECT id, last + 1, attempts, at, latency_us, status, class, error, size, response FROM h),
		del AS (DELETE FROM outbox_attempt a USING h WHERE a.outbox_id = h.id AND a.seq <= h.last + 1 - $11::int)
		SELECT id FROM u`, ids, tokens, statuses, now, ats, latencies, classes, errs, sizes, responses, outbox.AttemptsKept)
	if err != nil {
		return nil, err
	}
	updated, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	s.releaseAfter(ctx, now, updated...)
	return outbox.LostOf(done, updated), nil
}

// fencedAttempt runs update, an UPDATE of one claimed outbox row fenced by
// its lease token, and in the same statement records a in the row's
// attempt history (when a is set; the oldest attempts beyond
// outbox.AttemptsKept go) and inserts ev, a delivery.dead event (when ev
// is set). It returns store.ErrLeaseLost when the row was not updated.
func (s *Store) fencedAttempt(ctx context.Context, update string, args []any, now time.Time, a *outbox.Attempt,
	ev *outbox.DeadEvent) error {
	if a == nil && ev == nil {
		return s.fenced(ctx, update, args...)
	}
	arg := func(v any, cast string) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args)) + "::" + cast
	}
	q := `WITH u AS (` + update + ` RETURNING id, attempts, deaths, correlation_id)`
	if a != nil {
		q += `, h AS (SELECT u.id, u.attempts,
			coalesce((SELECT max(a.seq) FROM outbox_attempt a WHERE a.outbox_id = u.id), 0) AS last FROM u),
		del AS (DELETE FROM outbox_attempt a USING h
			WHERE a.outbox_id = h.id AND a.seq <= h.last + 1 - ` + arg(outbox.AttemptsKept, "int") + `),
		ins AS (INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us, http_status, class, error,
			response_size, response)
			SELECT id, last + 1, coalesce(nullif(` + arg(a.Number, "int") + `, 0), attempts), ` + arg(a.At, "timestamptz") + `, ` + arg(a.Latency.Microseconds(), "bigint") + `, ` +
			arg(a.HTTPStatus, "int") + `, ` + arg(a.Class, "text") + `, ` + arg(a.Error, "text") + `, ` +
			arg(a.ResponseSize, "bigint") + `, ` + arg(a.Response, "text") + ` FROM h)`
	}
	if ev != nil {
		at := arg(now, "timestamptz")
		q += `, ev AS (INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload_packed,
			next_attempt_at, created_at, updated_at, effect_hash)
			SELECT 'delivery.dead:' || id || ':' || deaths, 'delivery.dead', ` + arg(ev.Sink, "text") + `,
				'delivery.dead:' || id, '', correlation_id, ` + arg(outbox.PackPayload(ev.Payload), "bytea") + `, ` + at + `, ` + at + `, ` + at + `, ''
			FROM u ON CONFLICT (effect_key, sink) DO NOTHING)
		SELECT pg_notify('` + NotifyChannel + `', '') FROM u` // wake the relays, as an ingest does
		return s.fenced(ctx, q, args...)
	}
	return s.fenced(ctx, q+` SELECT 1 FROM u`, args...)
}

// Attempts implements outbox.Store.
func (s *Store) Attempts(ctx context.Context, id int64) ([]outbox.Attempt, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, attempt, at, latency_us, http_status, class, error, response_size,
		response FROM outbox_attempt WHERE outbox_id = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Attempt, error) {
		var a outbox.Attempt
		var us int64
		err := r.Scan(&a.Seq, &a.Number, &a.At, &us, &a.HTTPStatus, &a.Class, &a.Error, &a.ResponseSize, &a.Response)
		a.At, a.Latency = a.At.UTC(), time.Duration(us)*time.Microsecond
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	return out, nil
}

// ExtendLeases implements outbox.Store.
func (s *Store) ExtendLeases(ctx context.Context, held []outbox.Held, now time.Time, lease time.Duration) ([]int64, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ids, tokens := make([]int64, len(held)), make([]string, len(held))
	for i, h := range held {
		ids[i], tokens[i] = h.ID, h.Token
	}
	rows, err := s.pool.Query(ctx, `UPDATE outbox SET lease_expires_at = $3
		FROM unnest($1::bigint[], $2::text[]) AS h(id, token)
		WHERE outbox.id = h.id AND outbox.lease_token = h.token AND outbox.status = 'inflight'
		RETURNING outbox.id`, ids, tokens, now.Add(lease))
	if err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	updated, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	return lostHeld(held, updated), nil
}

// lostHeld returns the ids of held absent from updated.
func lostHeld(held []outbox.Held, updated []int64) []int64 {
	done := make([]outbox.Completion, len(held))
	for i, h := range held {
		done[i] = outbox.Completion{ID: h.ID}
	}
	return outbox.LostOf(done, updated)
}

// Retry implements outbox.Store.
func (s *Store) Retry(ctx context.Context, id int64, token string, now, at time.Time, f outbox.Failure) error {
	return s.fencedAttempt(ctx, `UPDATE outbox SET status = 'pending', lease_token = NULL, lease_expires_at = NULL,
		next_attempt_at = $5, last_status = $3, last_error = $6, last_response = $7, updated_at = $4
		WHERE id = $1 AND lease_token = $2 AND status = 'inflight'`,
		[]any{id, token, f.HTTPStatus, now, at, f.Error, f.Response}, now, f.Attempt, nil)
}

// Dead implements outbox.Store.
func (s *Store) Dead(ctx context.Context, id int64, token string, now time.Time, f outbox.Failure) error {
	err := s.fencedAttempt(ctx, `UPDATE outbox SET status = 'dead', lease_token = NULL, lease_expires_at = NULL,
		last_status = $3, last_error = $5, last_response = $6, updated_at = $4, deaths = deaths + 1
		WHERE id = $1 AND lease_token = $2 AND status = 'inflight'`,
		[]any{id, token, f.HTTPStatus, now, f.Error, f.Response}, now, f.Attempt, f.DeadEvent)
	if err == nil {
		s.releaseAfter(ctx, now, id)
	}
	return err
}

// Snooze implements outbox.Store.
func (s *Store) Snooze(ctx context.Context, id int64, token string, now, at time.Time) error {
	return s.fenced(ctx, `UPDATE outbox SET status = 'pending', lease_token = NULL, lease_expires_at = NULL,
		next_attempt_at = $4, attempts = greatest(attempts - 1, 0), updated_at = $3
		WHERE id = $1 AND lease_token = $2 AND status = 'inflight'`, id, token, now, at)
}

// GiveBack implements outbox.Store.
func (s *Store) GiveBack(ctx context.Context, id int64, token string, now, at time.Time, a *outbox.Attempt) error {
	return s.fencedAttempt(ctx, `UPDATE outbox SET status = 'pending', lease_token = NULL, lease_expires_at = NULL,
		next_attempt_at = $4, attempts = greatest(attempts - 1, 0), updated_at = $3
		WHERE id = $1 AND lease_token = $2 AND status = 'inflight'`, []any{id, token, now, at}, now, a, nil)
}

// DatabaseNow implements outbox.DatabaseClock: the database's clock,
// which every replica's relay follows so that leases stamped by one are
// judged by the same clock at another.
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("database clock: %w", err)
	}
	return now.UTC(), nil
}

// ReapExpired implements outbox.Store.
// The parked rows whose turn has come are released too (sweepBehindSQL).
func (s *Store) ReapExpired(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE outbox SET status = 'pending', lease_token = NULL,
		lease_expires_at = NULL, next_attempt_at = $1, updated_at = $1
		WHERE status = 'inflight' AND lease_expires_at < $1`, now)
	if err != nil {
		return 0, err
	}
	if _, err := s.pool.Exec(ctx, sweepBehindSQL, now); err != nil {
		return int(tag.RowsAffected()), fmt.Errorf("release parked rows: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ListDead implements outbox.Store.
func (s *Store) ListDead(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error) {
	where, args := deadWhere(f, []any{limit})
	rows, err := s.pool.Query(ctx, `SELECT `+outboxCols+` FROM outbox WHERE `+where+` ORDER BY id LIMIT $1`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows)
}

// briefCols are outboxCols without the payload and the last response.
var briefCols = strings.NewReplacer(payloadCol+",", "NULL::bytea,", "last_response,", "'' AS last_response,").Replace(outboxCols)

// ListDeadBrief implements outbox.Store.
func (s *Store) ListDeadBrief(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error) {
	where, args := deadWhere(f, []any{limit})
	rows, err := s.pool.Query(ctx, `SELECT `+briefCols+` FROM outbox WHERE `+where+` ORDER BY id LIMIT $1`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows)
}

// CountDead implements outbox.Store.
func (s *Store) CountDead(ctx context.Context, f outbox.DeadFilter) (int, error) {
	var n int
	if f.Counted() {
		err := s.pool.QueryRow(ctx, outbox.DeadCountSQL("$1::text"), f.Sink).Scan(&n)
		return n, err
	}
	where, args := deadWhere(f, nil)
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE `+where, args...).Scan(&n)
	return n, err
}

// deadWhere returns the condition selecting the dead rows f selects, its
// parameters numbered after args, and args with them appended.
func deadWhere(f outbox.DeadFilter, args []any) (string, []any) {
	where := "status = 'dead'"
	add := func(cond string, v any) {
		args = append(args, v)
		where += " AND " + strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args)))
	}
	if len(f.IDs) > 0 {
		add("id = ANY($?::bigint[])", f.IDs)
	}
	if f.Sink != "" {
		add("sink = $?", f.Sink)
	}
	if f.Kind != "" {
		add("kind = $?", f.Kind)
	}
	if !f.Since.IsZero() {
		add("updated_at >= $?", f.Since)
	}
	if !f.Until.IsZero() {
		add("updated_at < $?", f.Until)
	}
	if f.Passed {
		where += " AND " + outbox.PassedSQL
	}
	return where, args
}

// GetOutbox implements outbox.Store.
func (s *Store) GetOutbox(ctx context.Context, id int64) (outbox.Row, error) {
	r, err := scanRow(s.pool.QueryRow(ctx, `SELECT `+outboxCols+` FROM outbox WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

// Replay implements outbox.Store.
func (s *Store) Replay(ctx context.Context, f outbox.DeadFilter, now time.Time) (int, error) {
	where, args := deadWhere(f, []any{now})
	tag, err := s.pool.Exec(ctx, `UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = $1,
		age_from = $1, updated_at = $1,
		error_history = right(error_history || to_char($1 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
			|| ' replayed after ' || attempts || ' attempts; last error: ' || last_error || E'\n', `+historyMax+`)
		WHERE `+where, args...)
	return int(tag.RowsAffected()), err
}

// historyMax bounds error_history (characters; the oldest lines go first).
const historyMax = "4096"

// Discard implements outbox.Store.
func (s *Store) Discard(ctx context.Context, f outbox.DeadFilter, now time.Time) (int, error) {
	where, args := deadWhere(f, []any{now})
	tag, err := s.pool.Exec(ctx, `UPDATE outbox SET status = 'discarded', updated_at = $1 WHERE `+where, args...)
	return int(tag.RowsAffected()), err
}

// Stats implements outbox.Store.
// statsSQL counts the rows of each sink still to deliver (an index-only
// scan of outbox_open, whatever the delivered history holds) and reads its
// dead rows' count from outbox_dead_count.
const statsSQL = `SELECT sink, sum(pending)::bigint, sum(inflight)::bigint, sum(dead)::bigint, coalesce(min(oldest), $1)
	FROM (SELECT sink, count(*) FILTER (WHERE status = 'pending') AS pending,
	             count(*) FILTER (WHERE status = 'inflight') AS inflight, 0::bigint AS dead, min(created_at) AS oldest
	      FROM outbox WHERE status IN ('pending', 'inflight') GROUP BY sink
	      UNION ALL
	      SELECT sink, 0, 0, n, NULL FROM outbox_dead_count WHERE n > 0) live
	GROUP BY sink ORDER BY sink`

func (s *Store) Stats(ctx context.Context, now time.Time) ([]outbox.SinkStats, error) {
	rows, err := s.pool.Query(ctx, statsSQL, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outbox.SinkStats
	for rows.Next() {
		var st outbox.SinkStats
		var oldest time.Time
		if err := rows.Scan(&st.Sink, &st.Pending, &st.Inflight, &st.Dead, &oldest); err != nil {
			return nil, err
		}
		st.OldestPending = max(0, now.Sub(oldest))
		out = append(out, st)
	}
	return out, rows.Err()
}

// AcquireLease implements store.Leases. Expiry is decided by the
// database clock: now is ignored, so a replica whose clock runs fast
// cannot take a lease that is still live.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, _ time.Time) (int64, bool, error) {
	var token int64
	err := s.pool.QueryRow(ctx, `INSERT INTO lease (name, holder, token, expires_at)
		VALUES ($1, $2, 1, now() + $3 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
		token = CASE WHEN lease.holder = excluded.holder AND lease.expires_at >= now() THEN lease.token
		             ELSE lease.token + 1 END
		WHERE lease.holder = excluded.holder OR lease.expires_at < now()
		RETURNING token`, name, holder, ttl.Microseconds()).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// ReleaseLease implements store.Leases.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string, token int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE lease SET expires_at = 'epoch' WHERE name = $1 AND holder = $2 AND token = $3`,
		name, holder, token)
	return err
}

// CheckLease implements store.Leases, on the database clock.
func (s *Store) CheckLease(ctx context.Context, f inbox.Fence, _ time.Time) error {
	var live bool
	err := s.pool.QueryRow(ctx, `SELECT expires_at >= now() FROM lease WHERE name = $1 AND token = $2`,
		f.Name, f.Token).Scan(&live)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
		return fmt.Errorf("lease %s: %w", f.Name, store.ErrLeaseLost)
	}
	return err
}

// fenceLost is the SQLSTATE ediwatch_check_fence raises.
const fenceLost = "EW001"

// ingestErr translates an ingestion's errors by SQLSTATE: a refused fence
// into store.ErrLeaseLost; a deadlock or serialization failure (two
// ingests inserting rows of the same ordering keys in opposite orders), or
// a unique violation (a run racing a concurrent claim of its keys), into
// store.ErrTransient, after which the whole ingestion may be written
// again.
func ingestErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case fenceLost:
			return fmt.Errorf("ingest: %s: %w", pe.Message, store.ErrLeaseLost)
		case "40P01", "40001": // deadlock_detected, serialization_failure
			return fmt.Errorf("ingest: %s (%s): %w", pe.Message, pe.Code, store.ErrTransient)
		case "23505": // unique_violation
			// Only ediwatch_claim_sets' set-based inserts can raise it (every
			// other insert of an ingestion has ON CONFLICT): a concurrent
			// transaction committed a key or effect key of the run after
			// the run found none. Written again, the run sees it.
			return fmt.Errorf("ingest: %s (%s): %w", pe.Message, pe.Code, store.ErrTransient)
		}
	}
	return err
}

// NextControlNumber implements store.Store (see store.ControlNumbers).
func (s *Store) NextControlNumber(ctx context.Context, sender string) (int64, error) {
	return s.ctl.Next(ctx, sender)
}

// ControlNumbersBesideIngestions implements store.Store: NextControlNumber
// reserves on Store.side, never waiting for an ingestion.
func (s *Store) ControlNumbersBesideIngestions() bool { return true }

// KeepControlNumbers implements store.Store.
func (s *Store) KeepControlNumbers(sender string, next, end int64) { s.ctl.Keep(sender, next, end) }

// reserveControlNumbers advances sender's sequence by n: the block
// store.ControlNumbers hands out.
func (s *Store) reserveControlNumbers(ctx context.Context, sender string, n int64) (int64, error) {
	var end int64
	err := s.side.QueryRow(ctx, `INSERT INTO control_number (sender, next) VALUES ($1, 1 + $2)
		ON CONFLICT (sender) DO UPDATE SET next = control_number.next + $2
		RETURNING next`, sender, n).Scan(&end)
	return end, err
}

// FileStates implements inbox.Ledger.
func (s *Store) FileStates(ctx context.Context, source string, paths []string) (map[string]inbox.FileState, error) {
	rows, err := s.pool.Query(ctx, `SELECT path, size, mtime, sha256, status, attempts, last_error, post_done, updated_at
		FROM remote_file WHERE source = $1 AND path = ANY($2::text[])`, source, paths)
	if err != nil {
		return nil, fmt.Errorf("file states: %w", err)
	}
	defer rows.Close()
	out := make(map[string]inbox.FileState, len(paths))
	for rows.Next() {
		var p string
		var f inbox.FileState
		var status string
		if err := rows.Scan(&p, &f.Size, &f.MTime, &f.SHA256, &status, &f.Attempts, &f.LastError, &f.PostDone, &f.UpdatedAt); err != nil {
			return nil, err
		}
		f.Status = inbox.FileStatus(status)
		out[p] = f
	}
	return out, rows.Err()
}

// RecordFileProblem implements inbox.Ledger.
func (s *Store) RecordFileProblem(ctx context.Context, f inbox.FileInfo, status inbox.FileStatus, lastError string) (inbox.FileState, error) {
	var st inbox.FileState
	var sts string
	err := s.pool.QueryRow(ctx, `INSERT INTO remote_file (source, path, size, mtime, status, attempts, last_error,
		correlation_id, created_at, updated_at, sha256) VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $8, $9)
		ON CONFLICT (source, path) DO UPDATE SET status = excluded.status, last_error = excluded.last_error,
		sha256 = excluded.sha256,
		attempts = CASE WHEN remote_file.size = excluded.size AND remote_file.mtime = excluded.mtime
		                THEN remote_file.attempts + 1 ELSE 1 END,
		size = excluded.size, mtime = excluded.mtime, correlation_id = excluded.correlation_id,
		updated_at = excluded.updated_at
		RETURNING size, mtime, sha256, status, attempts, last_error, post_done, updated_at`,
		f.Source, f.Path, f.Size, f.MTime, string(status), lastError, f.CorrelationID, f.Now, f.SHA256).Scan(
		&st.Size, &st.MTime, &st.SHA256, &sts, &st.Attempts, &st.LastError, &st.PostDone, &st.UpdatedAt)
	st.Status = inbox.FileStatus(sts)
	return st, err
}

// LastFileTimes returns, per source, when its newest file was recorded
// (ingested or rejected): the silence alarm's reading (poller.Silence).

func (s *Store) LastFileTimes(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.pool.Query(ctx, store.LastFileTimesSQL)
	if err != nil {
		return nil, fmt.Errorf("last file times: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var src string
		var at time.Time
		if err := rows.Scan(&src, &at); err != nil {
			return nil, fmt.Errorf("last file times: %w", err)
		}
		out[src] = at.UTC()
	}
	return out, rows.Err()
}

// MarkPostDone implements inbox.Ledger. updated_at stays the file's
// ingest: moving an old file is no new file (LastFileTimes).
func (s *Store) MarkPostDone(ctx context.Context, source, path string, _ time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE remote_file SET post_done = true WHERE source = $1 AND path = $2`,
		source, path)
	return err
}

// Prune implements store.Store.
func (s *Store) Prune(ctx context.Context, before time.Time, batch int) (int, error) {
	exec := func(q string) (int64, error) {
		tag, err := s.pool.Exec(ctx, q, before, batch)
		return tag.RowsAffected(), err
	}
	// Each batch names its rows as an array, so the delete finds them by
	// key (or tuple id) one by one; "IN (SELECT ...)" may be planned as a
	// join against a sequential scan of the whole table, every batch.
	total, err := store.DeleteInBatches([]string{
		`DELETE FROM inbox WHERE key = ANY(ARRAY(SELECT key FROM inbox WHERE created_at < $1 LIMIT $2))`,
		`DELETE FROM sighting WHERE id = ANY(ARRAY(SELECT id FROM sighting WHERE created_at < $1 LIMIT $2))`,
		`DELETE FROM outbox WHERE id = ANY(ARRAY(SELECT id FROM outbox WHERE status IN ('delivered', 'discarded')
			AND updated_at < $1 LIMIT $2))`,
		`DELETE FROM remote_file WHERE ctid = ANY(ARRAY(SELECT ctid FROM remote_file
			WHERE updated_at < $1 AND post_done LIMIT $2))`,
	}, batch, exec)
	if err != nil {
		return total, err
	}
	// Locks untouched since (PrunePayloads deletes them sooner).
	if err := s.pruneLocks(ctx, before, batch); err != nil {
		return total, err
	}
	// The rollups of days that ended before the cutoff: one a day.
	tag, err := s.pool.Exec(ctx, `DELETE FROM reconcile_day WHERE day < $1`, store.DayStart(before))
	return total + int(tag.RowsAffected()), err
}

// PrunePayloads implements store.Store.
func (s *Store) PrunePayloads(ctx context.Context, before time.Time, batch int) (int, error) {
	total := 0
	for {
		n, err := s.prunePayloadBatch(ctx, before, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune payloads: %w", err)
		}
		if n < batch {
			break
		}
	}
	// The ordering and effect-key locks untouched since before: a lock
	// only makes two inserters of its key at once wait for each other, so
	// one left after its transaction ended orders nothing (ids are one
	// global sequence). Every payment has an ordering key of its own:
	// kept as long as keys, they were a row and an index entry a
	// payment, for a year.
	if err := s.pruneLocks(ctx, before, batch); err != nil {
		return total, fmt.Errorf("prune payloads: %w", err)
	}
	return total, nil
}

// pruneLocks deletes the rows of outbox_order and outbox_effect_lock not
// touched since before, batch rows a statement (housekeeping, not
// counted). An inserter touching a row at once either waits for the
// delete and inserts it again or updates it first, and the delete then
// skips it (its touched_at is read again once the row is unlocked).
func (s *Store) pruneLocks(ctx context.Context, before time.Time, batch int) error {
	// Named as arrays, as Prune's batches are.
	// A row an ingest holds is skipped (SKIP LOCKED), so the delete never
	// waits for an ingest and the two cannot lock each other's rows in
	// opposite orders.
	_, err := store.DeleteInBatches([]string{`DELETE FROM outbox_order WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM outbox_order WHERE touched_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)) AND touched_at < $1`,
		`DELETE FROM outbox_effect_lock WHERE effect_key = ANY(ARRAY(
			SELECT effect_key FROM outbox_effect_lock WHERE touched_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED))
			AND touched_at < $1`}, batch,
		func(q string) (int64, error) {
			tag, err := s.pool.Exec(ctx, q, before, batch)
			return tag.RowsAffected(), err
		})
	return err
}

// prunePayloadBatch prunes the payloads of up to batch rows in one
// transaction. A row is read and rewritten under its row lock: a replica
// pruning at once skips it.
func (s *Store) prunePayloadBatch(ctx context.Context, before time.Time, batch int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `SELECT id, `+payloadCol+` FROM outbox
		WHERE status IN ('delivered', 'discarded') AND NOT payload_pruned AND updated_at < $1
		ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED`, before, batch)
	if err != nil {
		return 0, err
	}
	var ids []int64
	var residues [][]byte
	for rows.Next() {
		var id int64
		var p []byte
		if err := rows.Scan(&id, &p); err != nil {
			rows.Close()
			return 0, err
		}
		ids, residues = append(ids, id), append(residues, outbox.PayloadResidue(p))
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `UPDATE outbox SET payload_packed = v.p, payload_json = NULL, payload_pruned = true,
		`+store.SlimPrunedSQL+` FROM unnest($1::bigint[], $2::bytea[]) v(id, p) WHERE outbox.id = v.id`, ids, residues); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM outbox_attempt WHERE outbox_id = ANY($1)`, ids); err != nil {
		return 0, err
	}
	return len(ids), tx.Commit(ctx)
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
		r, err := s.pool.Query(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		return r, r.Close, nil
	})
}
