// Package store defines what ediwatch keeps durably — the inbox, the
// outbox, the listing ledger, leases and control numbers — and the
// contract both drivers (postgres, sqlite) implement. One conformance
// suite, storetest, proves every driver against it.
//
// The central guarantee: a file's inbox claims, parsed results, outbox rows
// and ledger row are committed in one transaction, or none of them are.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// Outcome is what ingest decided for one transaction set.
type Outcome string

const (
	// Processed: newly claimed; its effects are in the outbox.
	Processed Outcome = "processed"
	// Duplicate: the key was already claimed with the same content.
	Duplicate Outcome = "duplicate"
	// BusinessDuplicate: a new key whose effects all exist already (a
	// regenerated document): recorded, nothing posted.
	BusinessDuplicate Outcome = "business_duplicate"
	// Conflict: the key was claimed with other content (a key conflict),
	// or an effect key of the set exists with other business content (an
	// effect conflict, SetResult.ConflictKeys): quarantined as a sighting
	// and counted, never silently dropped.
	Conflict Outcome = "conflict"
	// Rejected: the set failed validation; claimed as rejected, posts
	// nothing. The next arrival of the key that processes claims it again,
	// whatever its content hash; a rejected arrival with the same hash is a
	// duplicate, with another hash it re-records the rejection.
	Rejected Outcome = "rejected"
)

// Errors of the store, translated from each driver's own.
var (
	// ErrLeaseLost: the lease token no longer matches: an outbox row's
	// lease expired and the row was reaped or claimed by another relay,
	// or a directory lease (a Fence) passed to another replica.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrTransient: the ingestion was rolled back by a conflict with a
	// concurrent one (a deadlock or serialization failure); nothing of it
	// is recorded, and writing it again may succeed.
	ErrTransient = errors.New("store: transient conflict with a concurrent ingestion")
	ErrNotFound  = errors.New("store: not found")
)

// FileInfo describes the file an ingest records.
type FileInfo struct {
	Source string
	Path   string
	Size   int64
	MTime  time.Time
	SHA256 string
	// CorrelationID names this arrival in logs, rows and deliveries.
	CorrelationID string
	// Now is the time recorded on every row.
	Now time.Time
	// Fence, when set, is the directory lease the file was taken under:
	// Commit refuses (ErrLeaseLost) and records nothing when the lease no
	// longer has Fence.Token.
	Fence Fence
	// FailBeforeCommit, when set, makes Commit perform every write and
	// then fail with this error instead of committing. For tests that
	// prove a failed ingest leaves nothing behind.
	FailBeforeCommit error
}

// Effect is an outbox row to insert.
type Effect struct {
	Kind        string          `json:"kind"`
	Key         string          `json:"key"`
	OrderingKey string          `json:"ordering_key"`
	Sink        string          `json:"sink"`
	Payload     json.RawMessage `json:"payload"`
	// Hash is the SHA-256 (hex) of the effect's business content, without
	// envelope keys or control numbers: an existing effect key with the
	// same hash is a business duplicate, with another hash a conflict.
	Hash string `json:"hash"`
	// UnlessConflictIn, for an acknowledgment, is the key prefix of the
	// sets it answers: it is not inserted when one of them was a key
	// conflict in the same ingestion (quarantined content is not accepted).
	UnlessConflictIn string `json:"-"`
}

// SetRecord is one transaction set to claim.
type SetRecord struct {
	Key         string
	ContentHash string
	Type        string
	Rejected    bool
	Reason      string
	// Summary is the document summary kept on the inbox row (no patient
	// data); may be nil.
	Summary json.RawMessage
	Effects []Effect
}

// SetResult is the outcome of one set.
type SetResult struct {
	Key     string
	Outcome Outcome
	// OriginalCorrelationID is the correlation id of the claim a duplicate
	// or conflict refers to; for a new claim, the file's own.
	OriginalCorrelationID string
	// EffectKeys are the outbox rows this set inserted.
	EffectKeys []string
	// ConflictKeys are the set's effect keys that exist with other
	// business content (outcome Conflict); none was inserted.
	ConflictKeys []string
}

// FileStatus is the ledger status of a remote file.
type FileStatus string

const (
	// FileIngested: recorded (whatever its sets' outcomes); final.
	FileIngested FileStatus = "ingested"
	// FileRejected: not ingested, for a reason that will not change (too
	// large, not X12); final.
	FileRejected FileStatus = "rejected"
	// FileRetrying: a download or parse failed; retried on later polls.
	FileRetrying FileStatus = "retrying"
	// FileFailed: failed too often; final until an operator acts.
	FileFailed FileStatus = "failed"
)

// IngestResult is what Commit returns.
type IngestResult struct {
	Sets []SetResult
	// AckKeys are the acknowledgment outbox rows inserted.
	AckKeys []string
}

// Count returns how many sets had the outcome.
func (r *IngestResult) Count(o Outcome) int {
	n := 0
	for _, s := range r.Sets {
		if s.Outcome == o {
			n++
		}
	}
	return n
}

// Ingestion records one file. Sets and acknowledgments are added in file
// order; nothing is visible to others until Commit. An Ingestion is used
// by one goroutine; Rollback after Commit is a no-op, so `defer
// ing.Rollback()` is always safe.
//
// From its first AddSet or AddAck until Commit or Rollback, an ingestion
// may hold the database's write lock (SQLite) or a connection in a
// transaction (PostgreSQL), so the caller prepares everything first —
// parsing, control numbers — and adds without pause. It never needs a
// second connection meanwhile.
type Ingestion interface {
	AddSet(ctx context.Context, s SetRecord) error
	AddAck(ctx context.Context, e Effect) error
	// Commit writes the file's ledger row with status and commits all of
	// it in one transaction.
	Commit(ctx context.Context, status FileStatus, lastError string) (*IngestResult, error)
	Rollback()
}

// Ingester starts ingestions. Any number may run at once, from any number
// of processes: unique constraints decide every race.
type Ingester interface {
	BeginIngest(ctx context.Context, f FileInfo) (Ingestion, error)
}

// OutboxRow is one effect to deliver.
type OutboxRow struct {
	ID             int64
	EffectKey      string
	Kind           string
	Sink           string
	OrderingKey    string
	InboxKey       string
	CorrelationID  string
	Payload        json.RawMessage
	Status         string
	Attempts       int
	NextAttemptAt  time.Time
	LeaseToken     string
	LeaseExpiresAt time.Time
	LastError      string
	LastStatus     int
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// AgeFrom is when the row's age budget (relay.max_age) started: its
	// creation, or its last replay from the dead-letter queue.
	AgeFrom time.Time
	// LastResponse is a bounded excerpt of the receiver's last response
	// body. Receivers echo payloads, so it may hold patient data: it is
	// kept in the store only, never logged, shown only on request.
	LastResponse string
	// ErrorHistory holds the last errors of earlier lives of the row, one
	// line per replay (oldest first, bounded), so a replay keeps them.
	ErrorHistory string
}

// Outbox row statuses.
const (
	StatusPending   = "pending"
	StatusInflight  = "inflight"
	StatusDelivered = "delivered"
	StatusDead      = "dead"
	StatusDiscarded = "discarded"
)

// Completion is a delivered row to record.
type Completion struct {
	ID         int64
	Token      string
	HTTPStatus int
}

// Held is a claimed row a relay still holds: its id and lease token.
type Held struct {
	ID    int64
	Token string
}

// Failure is what a failed attempt recorded.
type Failure struct {
	HTTPStatus int
	// Error describes the failure without any response body.
	Error string
	// Response is a bounded excerpt of the response body (may hold
	// patient data; kept apart from Error, see OutboxRow.LastResponse).
	Response string
}

// LostOf returns the ids of done absent from updated.
func LostOf(done []Completion, updated []int64) []int64 {
	ok := make(map[int64]bool, len(updated))
	for _, id := range updated {
		ok[id] = true
	}
	var lost []int64
	for _, c := range done {
		if !ok[c.ID] {
			lost = append(lost, c.ID)
		}
	}
	return lost
}

// SinkStats are the outbox counts of one sink.
type SinkStats struct {
	Sink      string
	Pending   int
	Inflight  int
	Dead      int
	Delivered int
	// OldestPending is the age of the oldest pending row, 0 when none.
	OldestPending time.Duration
}

// Outbox is the relay's view of the outbox. Every transition of a claimed
// row is fenced by its lease token: a relay whose lease was lost gets
// ErrLeaseLost and must not act on the row.
type Outbox interface {
	// Claim leases up to limit due rows (of the given sinks, or all when
	// sinks is empty) for lease, never a row whose sink and ordering key
	// have an earlier pending or in-flight row, and never a row another
	// claimer holds. The attempt is counted at claim. Rows are returned in
	// id order.
	//
	// Order is per sink and ordering key, and it is commit order: of two
	// rows with the same sink and ordering key, the one inserted by a
	// transaction that is still open is never passed over; a second
	// transaction inserting a row of that key waits for the first to end,
	// and its row takes a higher id (ids of one key follow commit order).
	Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]OutboxRow, error)
	// ExtendLeases moves the lease of each held row to now+lease, fenced by
	// its token; it returns the ids whose lease was lost (another relay
	// owns them, or they were finished), which are left as they are. A
	// relay calls it while a batch is in flight so no lease lapses.
	ExtendLeases(ctx context.Context, held []Held, now time.Time, lease time.Duration) (lost []int64, err error)
	// Complete marks a claimed row delivered (httpStatus recorded).
	Complete(ctx context.Context, id int64, token string, now time.Time, httpStatus int) error
	// CompleteMany marks several claimed rows delivered in one statement,
	// each fenced by its own token; it returns the ids whose lease was
	// lost (those rows are left as they are).
	CompleteMany(ctx context.Context, done []Completion, now time.Time) (lost []int64, err error)
	// Retry returns a claimed row to pending, due at at, recording f.
	Retry(ctx context.Context, id int64, token string, now, at time.Time, f Failure) error
	// Dead moves a claimed row to the dead-letter queue, recording f.
	Dead(ctx context.Context, id int64, token string, now time.Time, f Failure) error
	// Snooze returns a claimed row to pending, due at at, without counting
	// the attempt (e.g. its sink's circuit breaker is open).
	Snooze(ctx context.Context, id int64, token string, now, at time.Time) error
	// ReapExpired returns rows whose lease expired to pending.
	ReapExpired(ctx context.Context, now time.Time) (int, error)
	// ListDead lists dead rows, of one sink when sink is not empty.
	ListDead(ctx context.Context, sink string, limit int) ([]OutboxRow, error)
	// GetOutbox returns one row.
	GetOutbox(ctx context.Context, id int64) (OutboxRow, error)
	// Replay returns dead rows to pending with their attempts reset and a
	// fresh age budget counted from now (AgeFrom): the given ids, or all of
	// sink when ids is empty and sink is set, or all when both are empty
	// and all is true. The last error is kept, and appended to ErrorHistory,
	// which keeps the row's earlier errors across replays. The effect key, and so the Idempotency-Key,
	// is unchanged.
	Replay(ctx context.Context, ids []int64, sink string, all bool, now time.Time) (int, error)
	// Discard resolves dead rows without delivering them. The rows are
	// kept (status discarded): their effect keys must go on preventing a
	// re-delivered document from posting again.
	Discard(ctx context.Context, ids []int64, now time.Time) (int, error)
	// Stats returns the counts per sink.
	Stats(ctx context.Context, now time.Time) ([]SinkStats, error)
}

// Fence is a lease as granted: writes made under it are refused once the
// lease has changed hands. The zero Fence fences nothing.
type Fence struct {
	Name  string
	Token int64
}

// IsZero reports whether f fences nothing.
func (f Fence) IsZero() bool { return f.Name == "" }

// Leases are named compare-and-set leases with fencing tokens, for
// sources (one poller per source and directory) and the maintenance
// leader. The token grows each time the lease changes hands.
type Leases interface {
	// AcquireLease takes name for holder until now+ttl when it is free,
	// expired or already held by holder. It returns the fencing token and
	// whether holder has the lease. The token stays the same while holder
	// renews in time and grows otherwise. On PostgreSQL now is the
	// database's clock (the caller's is ignored), so replicas with skewed
	// clocks agree on expiry.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (int64, bool, error)
	// CheckLease returns ErrLeaseLost unless the lease f.Name still has
	// f.Token and has not expired at now (the database clock on
	// PostgreSQL). Callers check it right before acting outside the store
	// (deleting or moving a remote file).
	CheckLease(ctx context.Context, f Fence, now time.Time) error
	// ReleaseLease gives the lease up if holder still holds it with token.
	ReleaseLease(ctx context.Context, name, holder string, token int64) error
}

// FileState is a remote file's row in the listing ledger.
type FileState struct {
	Size      int64
	MTime     time.Time
	SHA256    string
	Status    FileStatus
	Attempts  int
	LastError string
	PostDone  bool
	UpdatedAt time.Time
}

// Ledger is the poller's view of the listing ledger.
type Ledger interface {
	// FileStates returns, in one query, the ledger rows of the given paths
	// of source; paths without a row are absent from the map.
	FileStates(ctx context.Context, source string, paths []string) (map[string]FileState, error)
	// RecordFileProblem records a file that was not ingested: status
	// retrying or failed (a download or processing failure; attempts count
	// up while size and mtime stay the same) or rejected (e.g. too large).
	RecordFileProblem(ctx context.Context, f FileInfo, status FileStatus, lastError string) (FileState, error)
	// MarkPostDone records that post-processing (delete, move) is done.
	MarkPostDone(ctx context.Context, source, path string, now time.Time) error
}

// Facts are the raw rows reconciliation compares, since a time.
type Facts struct {
	// Parsed holds the summaries of processed 835 sets (no patient data).
	Parsed []ParsedPayment
	// Enqueued holds the payment.posted outbox rows.
	Enqueued []EnqueuedPayment
	// Files counts ledger rows per source, day (UTC) and status.
	Files []FileDay
	// Stuck counts rows pending or in flight since before StuckBefore.
	Stuck int
	Dead  int
	// Conflicts are the key and effect conflicts recorded since.
	Conflicts []ConflictSighting
}

// ConflictSighting is a recorded conflict: kind "conflict" (an envelope
// key seen with other content; Key is the envelope key) or
// "effect_conflict" (an effect key seen with other business content; Key
// is the effect key). Neither carries patient data.
type ConflictSighting struct {
	Kind          string
	Key           string
	Source        string
	Path          string
	CorrelationID string
	// OriginalCorrelationID names the arrival whose row was kept.
	OriginalCorrelationID string
	At                    time.Time
}

// ParsedPayment is an inbox row's 835 summary.
type ParsedPayment struct {
	Key     string
	Summary json.RawMessage
}

// EnqueuedPayment is a payment.posted outbox row.
type EnqueuedPayment struct {
	EffectKey string
	Status    string
	Payload   json.RawMessage
}

// FileDay is a count of ledger rows.
type FileDay struct {
	Source, Day, Status string
	Files               int
}

// Reconciler reads what reconciliation compares.
type Reconciler interface {
	ReconcileFacts(ctx context.Context, since, stuckBefore time.Time) (Facts, error)
}

// Counts are row counts for tests, metrics and reconciliation.
type Counts struct {
	Inbox     map[string]int // by status
	Sightings map[string]int // by kind
	Outbox    map[string]int // by status
	Files     map[string]int // by ledger status
}

// Rows is the part of a driver's result set that CollectCounts reads.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CollectCounts runs the count queries every driver shares through query,
// which returns the rows and a function that closes them.
func CollectCounts(query func(sql string) (Rows, func(), error)) (Counts, error) {
	c := Counts{Inbox: map[string]int{}, Sightings: map[string]int{}, Outbox: map[string]int{}, Files: map[string]int{}}
	for _, q := range []struct {
		sql string
		m   map[string]int
	}{
		{"SELECT status, count(*) FROM inbox GROUP BY status", c.Inbox},
		{"SELECT kind, count(*) FROM sighting GROUP BY kind", c.Sightings},
		{"SELECT status, count(*) FROM outbox GROUP BY status", c.Outbox},
		{"SELECT status, count(*) FROM remote_file GROUP BY status", c.Files},
	} {
		if err := collectCount(query, q.sql, q.m); err != nil {
			return c, fmt.Errorf("counts: %w", err)
		}
	}
	return c, nil
}

func collectCount(query func(string) (Rows, func(), error), sql string, m map[string]int) error {
	rows, closeRows, err := query(sql)
	if err != nil {
		return err
	}
	defer closeRows()
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		m[k] = n
	}
	return rows.Err()
}

// Store is everything a driver provides. It is safe for concurrent use.
type Store interface {
	Ingester
	Outbox
	Leases
	Ledger
	Reconciler
	// NextControlNumber returns our next outbound ISA13/GS06 for sender:
	// unique across every process, and greater than every number this
	// Store returned before for sender. It is never called inside an
	// ingestion, and numbers may be skipped (X12 allows gaps).
	NextControlNumber(ctx context.Context, sender string) (int64, error)
	// Prune deletes, in batches of batch rows, inbox rows and sightings
	// created before keysBefore, delivered or discarded outbox rows last
	// updated before it, and ledger rows of files that post-processing
	// removed from their drop. Dead rows stay until an operator resolves
	// them; ledger rows of files still in a drop stay, or the poller would
	// fetch them again after their keys are gone.
	Prune(ctx context.Context, keysBefore time.Time, batch int) (int, error)
	Counts(ctx context.Context) (Counts, error)
	// Migrate applies pending migrations; concurrent calls are safe.
	Migrate(ctx context.Context) error
	Close()
}

// NewToken returns a random lease token.
func NewToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("store: random token: %v", err)) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// NewHolderID returns a lease holder name unique to this process: host,
// pid and a random instance id, so replicas that all run as pid 1 in
// containers of one host name still differ. Call it once per process part
// and keep the result: renewals must present the same holder.
func NewHolderID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "ediwatch"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), NewToken()[:8])
}

// NewCorrelationID returns a random correlation id.
func NewCorrelationID() string { return NewToken()[:20] }

// RetentionMargin is the margin key retention must keep beyond the replay
// window: a day, or a tenth of the window when that is longer.
func RetentionMargin(replayWindow time.Duration) time.Duration {
	return max(24*time.Hour, replayWindow/10)
}

// ValidateRetention refuses a key retention shorter than the replay window
// plus its margin: a key pruned while its document can still be re-sent
// would let the re-send post again.
func ValidateRetention(keys, replayWindow time.Duration) error {
	if replayWindow <= 0 {
		return fmt.Errorf("retention.replay_window: must be positive (got %s)", replayWindow)
	}
	if need := replayWindow + RetentionMargin(replayWindow); keys < need {
		return fmt.Errorf("retention.keys: must be at least the replay window plus a margin, %s (got %s)", need, keys)
	}
	return nil
}
