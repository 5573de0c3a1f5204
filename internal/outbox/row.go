package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors of the store, translated from each driver's own. They live here,
// at the bottom of the imports, so the relay tells them apart; package
// store names them too (store.ErrLeaseLost is ErrLeaseLost).
var (
	// ErrLeaseLost: the lease token no longer matches: an outbox row's
	// lease expired and the row was reaped or claimed by another relay,
	// or a directory lease (an inbox.Fence) passed to another replica.
	ErrLeaseLost = errors.New("store: lease lost")
	ErrNotFound  = errors.New("store: not found")
)

// Effect is an outbox row to insert: one effect at one sink. The outbox is
// keyed by (Key, Sink): an effect routed to several sinks is a row per
// sink under the same effect key, and a re-sent effect finds its row at
// each sink whatever the order of the route that sends it there.
type Effect struct {
	Kind        string          `json:"kind"`
	Key         string          `json:"key"`
	OrderingKey string          `json:"ordering_key"`
	Sink        string          `json:"sink"`
	Payload     json.RawMessage `json:"payload"`
	// Packed, when set, is the payload already packed (PackPayload) and
	// Payload is empty: an ingest's spill keeps payloads packed, so a
	// large file's are copied, spilled and read back in a fifth of the
	// bytes, and packed outside the store's transaction.
	Packed []byte `json:"-"`
	// Hash is the SHA-256 (hex) of the effect's business content, without
	// envelope keys or control numbers: an existing row of the same key at
	// the same sink with the same hash is a business duplicate there; a row
	// of the key at any sink with another hash makes the effect a conflict,
	// inserted at no sink.
	Hash string `json:"hash"`
	// UnlessConflictIn, for an acknowledgment, is the key prefix of the
	// sets it answers: it is not inserted when one of them was a key
	// conflict in the same ingestion (quarantined content is not accepted).
	UnlessConflictIn string `json:"-"`
}

// Row is one effect to deliver to one sink.
type Row struct {
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
	// PayloadErr, when set, says why the stored payload could not be read
	// (a packed payload that does not unpack: the database damaged or
	// edited by hand); Payload is then empty. The relay dead-letters such
	// a row instead of delivering it, and the rows claimed beside it go on.
	PayloadErr string
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
	// Attempt, when set, is recorded in the row's attempt history with
	// the transition.
	Attempt *Attempt
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
	// patient data; kept apart from Error, see Row.LastResponse).
	Response string
	// Attempt, when set, is the attempt that failed, recorded in the
	// row's attempt history with the transition. It is nil when no request
	// was made (e.g. a row dead-lettered for its age before an attempt).
	Attempt *Attempt
	// DeadEvent, on a Dead, is the delivery.dead event to insert with the
	// transition; nil for none.
	DeadEvent *DeadEvent
}

// KindDeliveryDead is the kind of the event the relay records when it
// dead-letters a row whose kind is another (routed like any kind; CloudEvent
// type ediwatch.delivery.dead).
const KindDeliveryDead = "delivery.dead"

// DeadEvent is a delivery.dead outbox row that Dead inserts in the
// transaction of the transition, for sink, with payload. Its effect key
// is "delivery.dead:{dead row id}:{n}", n counting the row's deaths across
// replays, so each death is one event; its ordering key is
// "delivery.dead:{dead row id}" and its correlation id the dead row's.
type DeadEvent struct {
	Sink    string
	Payload json.RawMessage
}

// Attempt is one delivery attempt as kept in a row's attempt history: a
// request that was sent (whatever came back) or that failed on the
// network or timed out. A row given back without a request (an open
// circuit breaker, a release) has none.
type Attempt struct {
	// Seq numbers the row's attempts across all its lives (1, 2, ...): a
	// replayed row keeps its history. Set by the store; ignored on write.
	Seq int
	// Number is the row's attempt count in the life it was made in (the
	// count a replay resets). Set by the store from the row; on write a
	// non-zero Number is kept instead (GiveBack: a request made as attempt
	// n whose count is given back).
	Number  int
	At      time.Time
	Latency time.Duration
	// HTTPStatus is 0 when no response came back.
	HTTPStatus int
	// Class is the attempt's class, as in ediwatch_delivery_attempts_total:
	// 2xx, 3xx, 4xx, 5xx (by status), network (no response), timeout (the
	// sink's timeout expired) or unsent (the request could not be built).
	Class string
	// Error is the failure without any body (URL credentials redacted);
	// empty for a delivered attempt.
	Error string
	// ResponseSize is the size in bytes of the response body the receiver
	// sent (its Content-Length when larger than what was read).
	ResponseSize int64
	// Response is a bounded excerpt of a failed attempt's response body. It
	// may hold patient data: kept in the store only, shown on request.
	Response string
}

// AttemptsKept bounds a row's attempt history: older attempts are dropped
// when a new one is recorded.
const AttemptsKept = 50

// Attempt classes (see Attempt.Class).
const (
	ClassNetwork = "network"
	ClassTimeout = "timeout"
	ClassUnsent  = "unsent"
)

// StatusClass returns the class of an HTTP status: "2xx" ... "5xx".
func StatusClass(status int) string {
	switch {
	case status >= 100 && status < 600:
		return string(rune('0'+status/100)) + "xx"
	}
	return "other"
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

// SinkStats are the live outbox counts of one sink: rows still to
// deliver and dead rows. Delivered rows are history, counted by window
// (store.Activity), never in full. A sink with no live row has none.
type SinkStats struct {
	Sink     string
	Pending  int
	Inflight int
	Dead     int
	// OldestPending is the age of the oldest pending row, 0 when none.
	OldestPending time.Duration
}

// Store is the outbox as a driver keeps it. Every transition of a claimed
// row is fenced by its lease token: a relay whose lease was lost gets
// ErrLeaseLost and must not act on the row.
type Store interface {
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
	Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]Row, error)
	// ExtendLeases moves the lease of each held row to now+lease, fenced by
	// its token; it returns the ids whose lease was lost (another relay
	// owns them, or they were finished), which are left as they are. A
	// relay calls it while a batch is in flight so no lease lapses.
	ExtendLeases(ctx context.Context, held []Held, now time.Time, lease time.Duration) (lost []int64, err error)
	// CompleteMany marks several claimed rows delivered in one statement,
	// each fenced by its own token, and records each one's Attempt (when
	// set) in its history in the same transaction; it returns the ids
	// whose lease was lost (those rows are left as they are, and no
	// attempt of theirs is recorded).
	CompleteMany(ctx context.Context, done []Completion, now time.Time) (lost []int64, err error)
	// Retry returns a claimed row to pending, due at at, recording f (and
	// f.Attempt, when set, in the row's history in the same transaction).
	Retry(ctx context.Context, id int64, token string, now, at time.Time, f Failure) error
	// Dead moves a claimed row to the dead-letter queue, recording f (and
	// f.Attempt, as Retry does), and counts the row's death; with
	// f.DeadEvent set it inserts that event in the same transaction.
	Dead(ctx context.Context, id int64, token string, now time.Time, f Failure) error
	// Snooze returns a claimed row to pending, due at at, without counting
	// the attempt (e.g. its sink's circuit breaker is open).
	Snooze(ctx context.Context, id int64, token string, now, at time.Time) error
	// GiveBack is Snooze for a request that was made but is not counted
	// against the row (its receiver answered 410 Gone and the sink is
	// disabled): it records a in the row's history, numbered a.Number, in
	// the same transaction.
	GiveBack(ctx context.Context, id int64, token string, now, at time.Time, a *Attempt) error
	// ReapExpired returns rows whose lease expired to pending.
	ReapExpired(ctx context.Context, now time.Time) (int, error)
	// ListDead lists the dead rows f selects, oldest first.
	ListDead(ctx context.Context, f DeadFilter, limit int) ([]Row, error)
	// ListDeadBrief is ListDead without each row's payload and last
	// response (left empty), for listings that show neither.
	ListDeadBrief(ctx context.Context, f DeadFilter, limit int) ([]Row, error)
	// CountDead counts the dead rows f selects, reading none of them.
	CountDead(ctx context.Context, f DeadFilter) (int, error)
	// GetOutbox returns one row.
	GetOutbox(ctx context.Context, id int64) (Row, error)
	// Replay returns the dead rows f selects (every dead row for the zero
	// filter) to pending with their attempts reset and a fresh age budget
	// counted from now (AgeFrom). The last error is kept, and appended to
	// ErrorHistory, which keeps the row's earlier errors across replays.
	// The effect key, and so the Idempotency-Key, is unchanged.
	Replay(ctx context.Context, f DeadFilter, now time.Time) (int, error)
	// Discard resolves the dead rows f selects without delivering them. The
	// rows are kept (status discarded): their effect keys must go on
	// preventing a re-delivered document from posting again.
	Discard(ctx context.Context, f DeadFilter, now time.Time) (int, error)
	// Stats returns the counts per sink.
	Stats(ctx context.Context, now time.Time) ([]SinkStats, error)
	// Attempts returns the attempt history of row id, oldest first: its
	// last AttemptsKept attempts, across replays. A row with none, or no
	// such row, gives an empty list.
	Attempts(ctx context.Context, id int64) ([]Attempt, error)
}

// DeadFilter selects dead rows: each field that is set narrows the
// selection, and the zero filter selects every dead row.
type DeadFilter struct {
	IDs  []int64
	Sink string
	Kind string
	// Since and Until bound when the row was dead-lettered (its last
	// update): Since <= t < Until. A zero time sets no bound.
	Since, Until time.Time
	// Passed selects only claim events (claim.received) that a later
	// event of the same claim (its ordering key: a correction or a void)
	// passed at the same sink: it was delivered after this one died.
	// Replayed, such a row arrives after it, out of the claim's order.
	Passed bool
}

// PassedSQL is the condition of DeadFilter.Passed over the table outbox
// (unaliased), the same in both stores' SQL: outbox_claim_order serves
// the lookup.
const PassedSQL = `outbox.kind = 'claim.received' AND EXISTS (SELECT 1 FROM outbox l
	WHERE l.kind = 'claim.received' AND l.ordering_key = outbox.ordering_key AND l.id > outbox.id
	  AND l.sink = outbox.sink AND l.status = 'delivered')`

// Counted reports whether f selects the dead rows of every sink or of
// one sink and nothing narrower: a count the stores answer from
// outbox_dead_count, one row per sink, however many rows are dead.
func (f DeadFilter) Counted() bool {
	return len(f.IDs) == 0 && f.Kind == "" && f.Since.IsZero() && f.Until.IsZero() && !f.Passed
}

// DeadCountSQL counts the dead rows of every sink, or of the sink given
// as its one parameter when it is not empty, from the count the
// outbox's triggers keep (migration 0017); the same in both stores with
// the parameter written $1 or ?.
func DeadCountSQL(param string) string {
	return `SELECT coalesce(sum(n), 0) FROM outbox_dead_count WHERE ` + param + ` = '' OR sink = ` + param
}

// IsZero reports whether f selects every dead row.
func (f DeadFilter) IsZero() bool {
	return len(f.IDs) == 0 && f.Sink == "" && f.Kind == "" && f.Since.IsZero() && f.Until.IsZero() && !f.Passed
}
