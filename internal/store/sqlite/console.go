package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

var (
	_ store.PollRecorder   = (*Store)(nil)
	_ store.ConsoleReader  = (*Store)(nil)
	_ store.SessionRevoker = (*Store)(nil)
)

// recordPoll upserts a directory's poll status (see the postgres
// driver's); times of none are 0.
const recordPoll = `INSERT INTO source_poll (source, directory, holder, last_poll_at, last_ok_at, last_error,
		last_error_at, errors_day, errors_on_day)
	SELECT ?1, ?2, ?3, ?4, CASE WHEN ?5 = '' THEN ?4 ELSE 0 END, ?5, CASE WHEN ?5 <> '' THEN ?4 ELSE 0 END,
		?6, CASE WHEN ?5 <> '' THEN 1 ELSE 0 END
	WHERE ?7 = '' OR EXISTS (SELECT 1 FROM lease WHERE name = ?7 AND token = ?8)
	ON CONFLICT (source, directory) DO UPDATE SET holder = excluded.holder, last_poll_at = excluded.last_poll_at,
		last_ok_at = CASE WHEN excluded.last_ok_at <> 0 THEN excluded.last_ok_at ELSE source_poll.last_ok_at END,
		last_error = CASE WHEN excluded.last_error <> '' THEN excluded.last_error ELSE source_poll.last_error END,
		last_error_at = CASE WHEN excluded.last_error_at <> 0 THEN excluded.last_error_at ELSE source_poll.last_error_at END,
		errors_on_day = excluded.errors_on_day +
			CASE WHEN source_poll.errors_day = excluded.errors_day THEN source_poll.errors_on_day ELSE 0 END,
		errors_day = excluded.errors_day`

// RecordPoll implements store.PollRecorder.
func (s *Store) RecordPoll(ctx context.Context, source, directory, holder string, lease inbox.Fence, at time.Time,
	pollErr string) error {
	if _, err := s.db.ExecContext(ctx, recordPoll, source, directory, holder, us(at), pollErr,
		at.UTC().Format(time.DateOnly), lease.Name, lease.Token); err != nil {
		return fmt.Errorf("record poll: %w", err)
	}
	return nil
}

// PollStatuses implements store.ConsoleReader.
func (s *Store) PollStatuses(ctx context.Context) ([]store.PollStatus, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT source, directory, holder, last_poll_at, last_ok_at, last_error,
		last_error_at, errors_day, errors_on_day FROM source_poll ORDER BY source, directory`)
	if err != nil {
		return nil, fmt.Errorf("poll statuses: %w", err)
	}
	out, err := store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (store.PollStatus, error) {
		var p store.PollStatus
		var at, ok, errAt int64
		err := r.Scan(&p.Source, &p.Directory, &p.Holder, &at, &ok, &p.LastError, &errAt, &p.ErrorsDay, &p.ErrorsOnDay)
		p.LastPollAt = fromUS(at)
		if ok != 0 {
			p.LastOKAt = fromUS(ok)
		}
		if errAt != 0 {
			p.LastErrorAt = fromUS(errAt)
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("poll statuses: %w", err)
	}
	return out, nil
}

// AttemptStats implements store.ConsoleReader: the window's attempts,
// read through outbox_attempt_at, ranked by latency per sink; the nearest
// rank of p percent of n is (p*n+99)/100.
func (s *Store) AttemptStats(ctx context.Context, since time.Time) ([]store.AttemptStats, error) {
	rows, err := s.db.QueryContext(ctx, `WITH w AS (
			SELECT o.sink, a.http_status, a.latency_us,
				row_number() OVER (PARTITION BY o.sink ORDER BY a.latency_us) AS rn,
				count(*) OVER (PARTITION BY o.sink) AS n
			FROM outbox_attempt a JOIN outbox o ON o.id = a.outbox_id WHERE a.at >= ?)
		SELECT sink, max(n), sum(http_status BETWEEN 200 AND 299),
			max(CASE WHEN rn = (50 * n + 99) / 100 THEN latency_us END),
			max(CASE WHEN rn = (95 * n + 99) / 100 THEN latency_us END)
		FROM w GROUP BY sink ORDER BY sink`, us(since))
	if err != nil {
		return nil, fmt.Errorf("attempt stats: %w", err)
	}
	out, err := store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (store.AttemptStats, error) {
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
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT correlation_id, status, count(*) FROM inbox
		WHERE correlation_id IN (SELECT value FROM json_each(?1)) GROUP BY 1, 2
		UNION ALL SELECT correlation_id, kind, count(*) FROM sighting
		WHERE correlation_id IN (SELECT value FROM json_each(?1)) GROUP BY 1, 2`, string(list))
	if err != nil {
		return nil, fmt.Errorf("file outcomes: %w", err)
	}
	defer rows.Close()
	return store.TallyOutcomes(rows)
}

// RevokeSession implements store.SessionRevoker.
func (s *Store) RevokeSession(ctx context.Context, id string, expires, now time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO console_session_revoked (id, expires_at) VALUES (?, ?)
		ON CONFLICT (id) DO NOTHING`, id, us(expires)); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM console_session_revoked WHERE expires_at < ?`, us(now)); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// SessionRevoked implements store.SessionRevoker.
func (s *Store) SessionRevoked(ctx context.Context, id string) (bool, error) {
	var revoked bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM console_session_revoked WHERE id = ?)`, id).Scan(&revoked); err != nil {
		return false, fmt.Errorf("session revoked: %w", err)
	}
	return revoked, nil
}
