package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

var (
	_ store.PollRecorder   = (*Store)(nil)
	_ store.ConsoleReader  = (*Store)(nil)
	_ store.SessionRevoker = (*Store)(nil)
)

// recordPoll upserts a directory's poll status: a failed poll counts on
// its day, a successful one moves last_ok_at; the last error stays.
const recordPoll = `INSERT INTO source_poll (source, directory, holder, last_poll_at, last_ok_at, last_error,
		last_error_at, errors_day, errors_on_day)
	SELECT $1::text, $2::text, $3::text, $4::timestamptz, CASE WHEN $5::text = '' THEN $4::timestamptz END, $5::text,
		CASE WHEN $5::text <> '' THEN $4::timestamptz END, $6::text, CASE WHEN $5::text <> '' THEN 1 ELSE 0 END
	-- The fence: the lease row locked FOR SHARE, as ediwatch_check_fence
	-- does, so a takeover (which bumps the token) waits or is seen.
	WHERE $7::text = '' OR EXISTS (SELECT 1 FROM lease WHERE name = $7::text AND token = $8::bigint FOR SHARE)
	ON CONFLICT (source, directory) DO UPDATE SET holder = excluded.holder, last_poll_at = excluded.last_poll_at,
		last_ok_at = COALESCE(excluded.last_ok_at, source_poll.last_ok_at),
		last_error = CASE WHEN excluded.last_error <> '' THEN excluded.last_error ELSE source_poll.last_error END,
		last_error_at = COALESCE(excluded.last_error_at, source_poll.last_error_at),
		errors_on_day = excluded.errors_on_day +
			CASE WHEN source_poll.errors_day = excluded.errors_day THEN source_poll.errors_on_day ELSE 0 END,
		errors_day = excluded.errors_day`

// RecordPoll implements store.PollRecorder.
func (s *Store) RecordPoll(ctx context.Context, source, directory, holder string, lease inbox.Fence, at time.Time,
	pollErr string) error {
	if _, err := s.pool.Exec(ctx, recordPoll, source, directory, holder, at, pollErr,
		at.UTC().Format(time.DateOnly), lease.Name, lease.Token); err != nil {
		return fmt.Errorf("record poll: %w", err)
	}
	return nil
}

// PollStatuses implements store.ConsoleReader.
func (s *Store) PollStatuses(ctx context.Context) ([]store.PollStatus, error) {
	rows, err := s.pool.Query(ctx, `SELECT source, directory, holder, last_poll_at, last_ok_at, last_error,
		last_error_at, errors_day, errors_on_day FROM source_poll ORDER BY source, directory`)
	if err != nil {
		return nil, fmt.Errorf("poll statuses: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.PollStatus, error) {
		var p store.PollStatus
		var ok, errAt *time.Time
		err := r.Scan(&p.Source, &p.Directory, &p.Holder, &p.LastPollAt, &ok, &p.LastError, &errAt, &p.ErrorsDay,
			&p.ErrorsOnDay)
		p.LastPollAt = p.LastPollAt.UTC()
		if ok != nil {
			p.LastOKAt = ok.UTC()
		}
		if errAt != nil {
			p.LastErrorAt = errAt.UTC()
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("poll statuses: %w", err)
	}
	return out, nil
}

// AttemptStats implements store.ConsoleReader. The window's attempts are
// read from outbox_attempt_at alone (an index-only scan), each joined to
// its row by primary key for the sink.
func (s *Store) AttemptStats(ctx context.Context, since time.Time) ([]store.AttemptStats, error) {
	rows, err := s.pool.Query(ctx, `SELECT o.sink, count(*), count(*) FILTER (WHERE a.http_status BETWEEN 200 AND 299),
		percentile_disc(0.5) WITHIN GROUP (ORDER BY a.latency_us),
		percentile_disc(0.95) WITHIN GROUP (ORDER BY a.latency_us)
		FROM outbox_attempt a JOIN outbox o ON o.id = a.outbox_id
		WHERE a.at >= $1 GROUP BY o.sink ORDER BY o.sink`, since)
	if err != nil {
		return nil, fmt.Errorf("attempt stats: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AttemptStats, error) {
		return store.ScanAttemptStats(r)
	})
	if err != nil {
		return nil, fmt.Errorf("attempt stats: %w", err)
	}
	return out, nil
}

// FileOutcomes implements store.ConsoleReader, through the correlation
// id indexes of migration 0009.
func (s *Store) FileOutcomes(ctx context.Context, ids []string) (map[string]map[string]int, error) {
	if len(ids) == 0 {
		return map[string]map[string]int{}, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT correlation_id, status, count(*) FROM inbox
		WHERE correlation_id = ANY($1) GROUP BY 1, 2
		UNION ALL SELECT correlation_id, kind, count(*) FROM sighting WHERE correlation_id = ANY($1) GROUP BY 1, 2`, ids)
	if err != nil {
		return nil, fmt.Errorf("file outcomes: %w", err)
	}
	defer rows.Close()
	return store.TallyOutcomes(rows)
}

// RevokeSession implements store.SessionRevoker.
func (s *Store) RevokeSession(ctx context.Context, id string, expires, now time.Time) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO console_session_revoked (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, expires)
	b.Queue(`DELETE FROM console_session_revoked WHERE expires_at < $1`, now)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// SessionRevoked implements store.SessionRevoker.
func (s *Store) SessionRevoked(ctx context.Context, id string) (bool, error) {
	var revoked bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_session_revoked WHERE id = $1)`, id).Scan(&revoked); err != nil {
		return false, fmt.Errorf("session revoked: %w", err)
	}
	return revoked, nil
}
