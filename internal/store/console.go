package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
)

// PollStatus is how a source directory's polls went, as the replica
// holding its lease last recorded: every replica's console reads it.
type PollStatus struct {
	Source, Directory string
	// Holder is the replica that recorded the last poll.
	Holder string
	// LastPollAt is when the last poll ended, LastOKAt when the last one
	// without error did (zero: none yet).
	LastPollAt, LastOKAt time.Time
	// LastError is the last failed poll's error, as the poller logs it
	// (no secret, no patient data), and LastErrorAt when it was recorded;
	// both stay after later polls succeed.
	LastError   string
	LastErrorAt time.Time
	// ErrorsDay is the UTC day (2006-01-02) of the last poll and
	// ErrorsOnDay the polls that failed that day: the errors of today only
	// while ErrorsDay is today (ErrorsToday).
	ErrorsDay   string
	ErrorsOnDay int
}

// ErrorsToday returns the polls that failed on now's UTC day.
func (p PollStatus) ErrorsToday(now time.Time) int {
	if p.ErrorsDay != now.UTC().Format(time.DateOnly) {
		return 0
	}
	return p.ErrorsOnDay
}

// PollRecorder records the end of each poll of a source directory.
type PollRecorder interface {
	// RecordPoll records that holder finished polling source's directory
	// at at, with pollErr its error ("" when it succeeded). It is one
	// statement per poll, never per file; concurrent calls are safe (the
	// last one wins, error counts add up). It is fenced by the directory
	// lease the poll ran under: when lease.Name no longer has lease.Token
	// (another replica took the directory over), nothing is recorded, so
	// a replica that lost its lease never overwrites the new holder's
	// status. A zero lease records unfenced.
	RecordPoll(ctx context.Context, source, directory, holder string, lease inbox.Fence, at time.Time, pollErr string) error
}

// AttemptStats are one sink's delivery attempts over a recent window.
type AttemptStats struct {
	Sink string
	// Attempts counts every attempt (requests sent, network failures,
	// timeouts); OK those answered 2xx.
	Attempts, OK int
	// P50 and P95 are the attempts' latencies at those percentiles
	// (nearest rank).
	P50, P95 time.Duration
}

// ScanAttemptStats reads one row of a driver's attempt statistics query:
// sink, attempts, 2xx answers, then the p50 and p95 latencies in
// microseconds.
func ScanAttemptStats(r interface{ Scan(dest ...any) error }) (AttemptStats, error) {
	var a AttemptStats
	var p50, p95 int64
	err := r.Scan(&a.Sink, &a.Attempts, &a.OK, &p50, &p95)
	a.P50, a.P95 = time.Duration(p50)*time.Microsecond, time.Duration(p95)*time.Microsecond
	return a, err
}

// ConsoleReader reads what the console's overview, sinks and files
// pages show beyond the other readers. Read only; safe for concurrent
// use.
type ConsoleReader interface {
	// PollStatuses returns every recorded source directory's poll status,
	// by source and directory.
	PollStatuses(ctx context.Context) ([]PollStatus, error)
	// AttemptStats returns, per sink with attempts at or after since, its
	// attempts, their 2xx count and latency percentiles: one query for
	// every sink.
	AttemptStats(ctx context.Context, since time.Time) ([]AttemptStats, error)
	// FileOutcomes returns, per correlation id asked, its arrival's sets
	// by outcome (the inbox rows' status, the sightings' kind), as the
	// file's page counts them: one query for every id.
	FileOutcomes(ctx context.Context, correlationIDs []string) (map[string]map[string]int, error)
}

// SessionRevoker keeps the console's signed-out sessions until they would
// have expired, so a signed session cookie, which every replica verifies
// alone, ends at sign-out on every replica.
type SessionRevoker interface {
	// RevokeSession records session id as ended until expires, and
	// forgets sessions that expired before now. Idempotent.
	RevokeSession(ctx context.Context, id string, expires, now time.Time) error
	// SessionRevoked reports whether id was revoked.
	SessionRevoked(ctx context.Context, id string) (bool, error)
}

// TallyOutcomes reads (correlation id, outcome, count) rows into
// FileOutcomes's answer: per arrival, the count of each outcome.
func TallyOutcomes(rows Rows) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	for rows.Next() {
		var id, outcome string
		var n int
		if err := rows.Scan(&id, &outcome, &n); err != nil {
			return nil, fmt.Errorf("file outcomes: %w", err)
		}
		if out[id] == nil {
			out[id] = map[string]int{}
		}
		out[id][outcome] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("file outcomes: %w", err)
	}
	return out, nil
}
