// Package store composes what ediwatch keeps durably: the inbox contracts
// (internal/inbox: ingestions, the listing ledger), the outbox contract
// (internal/outbox), leases and control numbers, into the one Store both
// drivers (postgres, sqlite) implement. One conformance suite, storetest,
// proves every driver against it.
//
// The central guarantee: a file's inbox claims, parsed results, outbox rows
// and ledger row are committed in one transaction, or none of them are.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
)

// Errors of the store, translated from each driver's own. They are the
// outbox's, so the relay, which cannot import store, tells them apart too.
var (
	// ErrLeaseLost: the lease token no longer matches: an outbox row's
	// lease expired and the row was reaped or claimed by another relay,
	// or a directory lease (an inbox.Fence) passed to another replica.
	ErrLeaseLost = outbox.ErrLeaseLost
	ErrNotFound  = outbox.ErrNotFound
	// ErrTransient: see inbox.ErrTransient.
	ErrTransient = inbox.ErrTransient
)

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
	CheckLease(ctx context.Context, f inbox.Fence, now time.Time) error
	// ReleaseLease gives the lease up if holder still holds it with token.
	ReleaseLease(ctx context.Context, name, holder string, token int64) error
}

// Facts are the raw rows reconciliation compares, since a time.
type Facts struct {
	// Parsed holds the summaries of processed 835 sets that name a payer
	// (no patient data) and Enqueued the payment.posted outbox rows, when
	// ReadFacts collects them.
	Parsed   []ParsedPayment
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

// ParsedPayment is an inbox row's 835 summary; Key is the row's inbox
// key.
type ParsedPayment struct {
	Key     string
	Summary json.RawMessage
}

// EnqueuedPayment is a payment.posted outbox row: one per sink of the
// payment's route.
type EnqueuedPayment struct {
	// EffectKey is the payment's effect key, also of a row migration 0014
	// kept under its "@SINK:" key (a second row of the payment at a sink).
	EffectKey string
	Sink      string
	Status    string
	// PayerID and Amount are the payment's, as its payload holds them.
	// They are read from the summary of the set that enqueued the row
	// (the same reading of the same document, in the same transaction),
	// so a day's reconciliation reads no payload; from the payload itself
	// only for a row whose set has no summary.
	PayerID, Amount string
}

// FileDay is a count of ledger rows.
type FileDay struct {
	Source, Day, Status string
	Files               int
}

// Reconciler reads what reconciliation compares.
type Reconciler interface {
	// ReconcileCounts reads Facts less the payments: files per source,
	// day and status, stuck and dead rows, conflicts since a time.
	ReconcileCounts(ctx context.Context, since, stuckBefore time.Time) (Facts, error)
	// PaymentFacts streams to each the payments parsed or enqueued in
	// [from, to), grouped by business key (PaymentFact), each payment
	// row with whether its payment has a row created before from:
	// however long the window, reconciliation holds one key's rows at a
	// time and the store sorts the rest.
	PaymentFacts(ctx context.Context, from, to time.Time, each func(PaymentFact) error) error
	// PaymentsEnqueuedBefore returns which of the business keys have a
	// payment.posted row created before a time (by its effect key: a row
	// migration 0014 kept under an "@SINK:" key is not looked up).
	PaymentsEnqueuedBefore(ctx context.Context, keys []string, before time.Time) (map[string]bool, error)
	// UndeliveredPayments streams to each, as PaymentFacts streams
	// enqueued payments but in no particular order, the payment.posted
	// rows created in [from, to) that are not delivered at their sink
	// (pending, in flight, dead or discarded) while no other row of the
	// payment is delivered there: few, and read from a partial index of
	// them.
	UndeliveredPayments(ctx context.Context, from, to time.Time, each func(PaymentFact) error) error
	// ReconcileDays returns the day rollups stored for the UTC days that
	// start in [from, to) (two midnights), oldest first.
	ReconcileDays(ctx context.Context, from, to time.Time) ([]ReconcileDay, error)
	// PutReconcileDay stores a day's rollup, replacing the one stored
	// unless that one has a later Version.
	PutReconcileDay(ctx context.Context, d ReconcileDay) error
}

// EndOfTime ends a window that has no end.
var EndOfTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// DayStart returns the midnight UTC that starts t's day.
func DayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// ReconcileDay is the rollup of a UTC day's payments, folded once the day
// has closed: its body is reconciliation's (package reconcile), opaque to
// the store, and Version names its format, so a format a later release
// changes is folded again.
type ReconcileDay struct {
	Day     time.Time // midnight UTC
	Version int
	Body    []byte
	// FoldedAt is when it was folded, by the folding replica's clock.
	FoldedAt time.Time
}

// PaymentFact is one row of the payments PaymentFacts streams: a
// processed 835 set's summary (Parsed) or a payment.posted outbox row
// (Enqueued), under its business key Key ("payment:{payer}:{trace}": a
// summary's payer_id and trace_number, a row's effect key less its
// "@SINK:" prefix). Every fact of a key comes before the next key's
// (keys in byte order), a key's summaries first, each kind oldest first.
type PaymentFact struct {
	Key      string
	Parsed   *ParsedPayment
	Enqueued *EnqueuedPayment
	// Before, of an enqueued payment: the payment has a payment.posted
	// row created before the window's start (by its effect key).
	Before bool
}

// ReadFacts reads, for tests and tools, everything reconciliation since
// a time compares, its payments collected into Facts.Parsed and
// Facts.Enqueued: ReconcileCounts and the payments of PaymentFacts from
// since on.
func ReadFacts(ctx context.Context, r Reconciler, since, stuckBefore time.Time) (Facts, error) {
	f, err := r.ReconcileCounts(ctx, since, stuckBefore)
	if err != nil {
		return f, err
	}
	err = r.PaymentFacts(ctx, since, EndOfTime, func(pf PaymentFact) error {
		if pf.Parsed != nil {
			f.Parsed = append(f.Parsed, *pf.Parsed)
		}
		if pf.Enqueued != nil {
			f.Enqueued = append(f.Enqueued, *pf.Enqueued)
		}
		return nil
	})
	return f, err
}

// Counts are row counts for tests, metrics and reconciliation.
type Counts struct {
	Inbox     map[string]int // by status
	Sightings map[string]int // by kind
	Outbox    map[string]int // by status
	Files     map[string]int // by ledger status
}

// Rows is the part of a driver's result set that CollectCounts and
// CollectRows read.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CountQueries are a driver's count queries, each returning (key, count)
// rows.
type CountQueries struct {
	Inbox, Sightings, Outbox, Files string
}

// CollectCounts runs a driver's count queries qs through query, which
// returns the rows and a function that closes them.
func CollectCounts(qs CountQueries, query func(sql string) (Rows, func(), error)) (Counts, error) {
	c := Counts{Inbox: map[string]int{}, Sightings: map[string]int{}, Outbox: map[string]int{}, Files: map[string]int{}}
	for _, q := range []struct {
		sql string
		m   map[string]int
	}{
		{qs.Inbox, c.Inbox},
		{qs.Sightings, c.Sightings},
		{qs.Outbox, c.Outbox},
		{qs.Files, c.Files},
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

// LastFileTimesSQL is LastFileTimes in both drivers: a skip scan of the
// index of recorded files by source (migration 0016), one probe per
// source, returning (source, newest updated_at) rows. Each read of the
// ledger names it "remote_file r", so a driver may pin the index there
// (SQLite, which otherwise reads every recorded file through the index
// by status).
const LastFileTimesSQL = `WITH RECURSIVE src(source) AS (
	SELECT max(r.source) FROM remote_file r WHERE r.status IN ('ingested', 'rejected')
	UNION ALL
	SELECT (SELECT max(r.source) FROM remote_file r WHERE r.status IN ('ingested', 'rejected') AND r.source < src.source)
	FROM src WHERE src.source IS NOT NULL)
	SELECT source, (SELECT max(r.updated_at) FROM remote_file r
	  WHERE r.status IN ('ingested', 'rejected') AND r.source = src.source)
	FROM src WHERE source IS NOT NULL`

// Store is everything a driver provides. It is safe for concurrent use.
type Store interface {
	inbox.Ingester
	inbox.ClaimLookup
	inbox.AnswerLookup
	outbox.Store
	outbox.SinkStates
	Leases
	inbox.Ledger
	inbox.FileBrowser
	ActivityReader
	LeaseReader
	Reconciler
	PollRecorder
	ConsoleReader
	SessionRevoker
	// LastFileTimes returns, per source, when its newest file was recorded
	// in the ledger (ingested or rejected), by any replica.
	LastFileTimes(ctx context.Context) (map[string]time.Time, error)
	// NextControlNumber returns our next outbound ISA13/GS06 for sender:
	// unique across every process, and greater than every number this
	// Store returned before for sender. It is never called inside an
	// ingestion, and numbers may be skipped (X12 allows gaps).
	NextControlNumber(ctx context.Context, sender string) (int64, error)
	// ControlNumbersBesideIngestions and KeepControlNumbers are those of
	// inbox.ControlNumberStore.
	ControlNumbersBesideIngestions() bool
	KeepControlNumbers(sender string, next, end int64)
	// Prune deletes, in batches of batch rows, inbox rows and sightings
	// created before keysBefore, the rollups of days that ended by then,
	// delivered or discarded outbox rows last updated before it, and
	// ledger rows of files that post-processing
	// removed from their drop. Dead rows stay until an operator resolves
	// them; ledger rows of files still in a drop stay, or the poller would
	// fetch them again after their keys are gone.
	Prune(ctx context.Context, keysBefore time.Time, batch int) (int, error)
	// PrunePayloads replaces, in transactions of batch rows, the payload
	// of each delivered or discarded outbox row that finished before
	// before by its residue (outbox.PayloadResidue) and deletes its
	// attempts, and returns how many rows it pruned. Dead, pending and
	// in-flight rows keep theirs.
	PrunePayloads(ctx context.Context, before time.Time, batch int) (int, error)
	Counts(ctx context.Context) (Counts, error)
	// Migrate applies pending migrations; concurrent calls are safe.
	Migrate(ctx context.Context) error
	Close()
}

// CollectRows reads every row of rows with scan, closes them with
// closeRows and returns them, or the first error of a scan or of the
// iteration (rows.Err).
func CollectRows[T any](rows Rows, closeRows func(), scan func(Rows) (T, error)) ([]T, error) {
	defer closeRows()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// StreamRows scans every row of rows and hands it to each, then closes
// them: CollectRows for a result too large to hold.
func StreamRows[T any](rows Rows, closeRows func(), scan func(Rows) (T, error), each func(T) error) error {
	defer closeRows()
	for rows.Next() {
		v, err := scan(rows)
		if err == nil {
			err = each(v)
		}
		if err != nil {
			return err
		}
	}
	return rows.Err()
}

// DeleteInBatches runs each statement of deletes through exec until it
// deletes fewer than batch rows, and returns how many rows they deleted
// in all. exec runs one statement with the batch size as its limit and
// returns the rows it deleted. Drivers prune with it.
func DeleteInBatches(deletes []string, batch int, exec func(sql string) (int64, error)) (int, error) {
	total := 0
	for _, q := range deletes {
		for {
			n, err := exec(q)
			if err != nil {
				return total, fmt.Errorf("prune: %w", err)
			}
			total += int(n)
			if int(n) < batch {
				break
			}
		}
	}
	return total, nil
}

// failBeforeCommitKey is the context key of FailBeforeCommit.
type failBeforeCommitKey struct{}

// FailBeforeCommit returns a context under which an ingestion's Commit
// performs every write and then fails with err instead of committing. It
// is for the conformance suite, which proves a failed ingest leaves
// nothing behind; drivers read it with InjectedCommitFailure.
func FailBeforeCommit(ctx context.Context, err error) context.Context {
	return context.WithValue(ctx, failBeforeCommitKey{}, err)
}

// InjectedCommitFailure returns the error FailBeforeCommit put in ctx, nil
// when none.
func InjectedCommitFailure(ctx context.Context) error {
	err, _ := ctx.Value(failBeforeCommitKey{}).(error)
	return err
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

// PaymentTotals returns the payer_id and amount of a payment payload as
// stored (packed or not), for EnqueuedPayment; empty strings when it
// holds none.
func PaymentTotals(stored []byte) (payer, amount string, err error) {
	p, err := outbox.UnpackPayload(stored)
	if err != nil {
		return "", "", err
	}
	var v struct {
		PayerID string          `json:"payer_id"`
		Amount  json.RawMessage `json:"amount"`
	}
	if json.Unmarshal(p, &v) != nil {
		return "", "", nil
	}
	if json.Unmarshal(v.Amount, &amount) != nil {
		amount = string(v.Amount) // a bare number
	}
	return v.PayerID, amount, nil
}

// SlimPrunedSQL is what a row whose payload is pruned gives up beside
// its payload (an UPDATE's SET list, both dialects): the key of the set
// that enqueued it (the file it came from stays in its correlation id)
// and, for a payment, its ordering key, which is its effect key again.
// Neither is read of a finished row: ordering holds among open rows, and
// reconciliation takes a pruned row's payer and amount from its residue.
// They were a fifth of a year of finished rows.
const SlimPrunedSQL = `inbox_key = '', ordering_key = CASE WHEN kind = 'payment.posted' THEN '' ELSE ordering_key END`
