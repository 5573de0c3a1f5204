package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
)

// ErrTransient: an ingestion was rolled back by a conflict with a
// concurrent one (a deadlock or serialization failure, which a driver
// translates into it); nothing of it is recorded, and writing it again may
// succeed.
var ErrTransient = errors.New("store: transient conflict with a concurrent ingestion")

// ErrClaimChanged: a set added as Claimed (its payload left out, since a
// lookup found its key claimed) is claimable after all when written: its
// inbox row was pruned, or is a rejection, which the next processing
// arrival reclaims. The ingestion fails and records nothing; the caller
// writes the file again with every payload.
var ErrClaimChanged = errors.New("store: a set looked up as claimed is claimable again")

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

// FileInfo describes the file an ingest records.
type FileInfo struct {
	Source string
	Path   string
	Size   int64
	MTime  time.Time
	SHA256 string
	// SHA256Of, when set and SHA256 is empty, gives SHA256: it is called
	// once, after the parse and before the write (ediwatch ingest hashes
	// the file on a goroutine of its own while the file is parsed).
	SHA256Of func() (string, error)
	// CorrelationID names this arrival in logs, rows and deliveries.
	CorrelationID string
	// Now is the time recorded on every row.
	Now time.Time
	// Fence, when set, is the directory lease the file was taken under:
	// Commit refuses (ErrLeaseLost) and records nothing when the lease no
	// longer has Fence.Token.
	Fence Fence
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
	Effects []outbox.Effect
	// Claimed says a lookup before the ingestion (ClaimLookup) found Key
	// claimed, not as a rejection: Summary and Effects are left out, since
	// the outcome is a duplicate or a key conflict whatever they are. The
	// ingestion verifies it: if Key is not claimed, or claimed as a
	// rejection, when the set is written, the ingestion fails with
	// ErrClaimChanged and records nothing.
	Claimed bool
	// Clean says the set's document was read without a single problem
	// and, for a payment, balanced: nothing of it but its envelope shows
	// in its 999 or its report. Kept with the claim (inbox.clean), so that
	// the same content sent again need not be read again (ClaimLookup).
	Clean bool
}

// SetResult is the outcome of one set.
type SetResult struct {
	Key     string
	Outcome Outcome
	// OriginalCorrelationID is the correlation id of the claim a duplicate
	// or conflict refers to; for a new claim, the file's own.
	OriginalCorrelationID string
	// EffectKeys are the effect keys of the outbox rows this set inserted,
	// one per row: an effect's rows at several sinks share its key and
	// come one after another (a Report names it once).
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
func (r *IngestResult) Count(o Outcome) int { return count(r.Sets, o) }

func (s SetResult) outcome() Outcome { return s.Outcome }

// count returns how many of sets had the outcome o.
func count[S interface{ outcome() Outcome }](sets []S, o Outcome) int {
	n := 0
	for _, s := range sets {
		if s.outcome() == o {
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
	AddAck(ctx context.Context, e outbox.Effect) error
	// NextControlNumbers gives the file's acknowledgments up to n control
	// numbers of sender while the ingestion is open, as the block
	// [first, end), 0 < end-first <= n: a write begun while its file is
	// still parsed (Options.PipeFrom) numbers the parse's
	// acknowledgments through it, unless the store's own numbers never
	// wait for an ingestion (ControlNumberStore). A store whose
	// reservation could wait for the ingestion (SQLite's one writer: the
	// write lock it holds) reserves them in the ingestion's transaction,
	// so a rollback takes them back with the acknowledgments; once the
	// ingestion has committed, those the parse left unused are given back
	// (ControlNumberStore.KeepControlNumbers). Part of
	// the contract, not an optional interface, so that no wrapper of an
	// ingestion can hide it.
	NextControlNumbers(ctx context.Context, sender string, n int64) (first, end int64, err error)
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

// ClaimLookup is implemented by a store that can tell, ahead of an
// ingestion and outside its transaction, which keys are already claimed.
type ClaimLookup interface {
	// ClaimedKeys returns those of keys whose inbox row exists with a
	// status other than rejected (processed or conflict), with what the
	// row says of the set that claimed it. The answer may be stale by the
	// time an ingestion writes; SetRecord.Claimed says how the ingestion
	// verifies it.
	//
	// It is called while the file's own ingestion may be under way, which
	// waits for the lookup's answers: it must take no connection or lock
	// that an ingestion holds.
	ClaimedKeys(ctx context.Context, keys []string) (map[string]Claim, error)
}

// Claim is what a claim lookup found of a claimed key.
type Claim struct {
	// CleanHash is the content hash of the set that claimed the key when
	// that set was clean (SetRecord.Clean), else "". A set of the same
	// content hash is as clean: its document need not be read.
	CleanHash string
}

// AnswerLookup is implemented by a store that can name, outside an
// ingestion, what a received acknowledgment answers (process.Originals):
// the inbox key of a set by its swapped envelope, the effect key of a
// claim by its ordering key. Its answers may be stale.
type AnswerLookup interface {
	// SetKey returns the key of a processed inbox row that starts with
	// prefix and ends with suffix, with one key part (no ':') between
	// them; with an empty suffix, any processed row under prefix. "" when
	// there is none; the most recent when there are several.
	SetKey(ctx context.Context, prefix, suffix string) (string, error)
	// ClaimKey returns the effect key of the most recent claim.received
	// outbox row with the ordering key, or "".
	ClaimKey(ctx context.Context, orderingKey string) (string, error)
}

// Fence is a lease as granted: writes made under it are refused once the
// lease has changed hands. The zero Fence fences nothing.
type Fence struct {
	Name  string
	Token int64
}

// IsZero reports whether f fences nothing.
func (f Fence) IsZero() bool { return f.Name == "" }

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
