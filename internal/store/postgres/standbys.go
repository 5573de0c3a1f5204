package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Standbys is how many standbys must hold a commit before an
// irreversible step that depends on it (a partner's file deleted or
// moved) may run: store.wait_for_standbys.
type Standbys struct {
	// All waits for every physical standby streaming from the primary at
	// the moment of each check ("auto"); none streaming, none waited for.
	All bool
	// N, when All is false, waits for at least N of them (0: no wait).
	N int
}

// ErrStandbysBehind is returned by WaitForStandbys when the standbys it
// waits for have not flushed the commit before its wait ends.
var ErrStandbysBehind = errors.New("the standbys have not flushed the commit yet")

// standbysSQL counts the physical standbys streaming from this primary
// and those that flushed WAL up to $1 (flush_lsn: written and fsynced on
// the standby, so a standby promoted after a crash of the primary has
// the commit). Logical replication's senders (an active logical slot's)
// are not standbys. A role without pg_monitor (or pg_read_all_stats)
// sees each sender's state as NULL: counted apart, for a clear error.
const standbysSQL = `SELECT count(*) FILTER (WHERE state = 'streaming'),
	count(*) FILTER (WHERE state = 'streaming' AND flush_lsn >= $1::pg_lsn),
	count(*) FILTER (WHERE state IS NULL)
	FROM pg_stat_replication
	WHERE pid NOT IN (SELECT active_pid FROM pg_replication_slots WHERE slot_type = 'logical' AND active_pid IS NOT NULL)`

// WaitForStandbys returns once every commit this store made before the
// call has been flushed by the standbys want names, checking again after
// 1, 2, 4, 8 and 16 ms, then every 20 ms; ErrStandbysBehind (wrapped, saying how many hold it) when wait
// passes first. Ingest and delivery never call it: only the steps that
// cannot be undone wait. The mark is pg_current_wal_lsn() at the call,
// at or past every earlier commit's record.
func (s *Store) WaitForStandbys(ctx context.Context, want Standbys, wait time.Duration) error {
	if !want.All && want.N <= 0 {
		return nil
	}
	var mark string
	if err := s.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&mark); err != nil {
		return fmt.Errorf("standbys: %w", err)
	}
	deadline := time.Now().Add(wait)
	// A healthy standby flushes within a millisecond or two of the
	// commit: check again soon, then every 20 ms.
	delay := time.Millisecond
	for {
		var streaming, flushed, hidden int
		if err := s.pool.QueryRow(ctx, standbysSQL, mark).Scan(&streaming, &flushed, &hidden); err != nil {
			return fmt.Errorf("standbys: %w", err)
		}
		if hidden > 0 {
			return fmt.Errorf("standbys: the store's role cannot read the standbys' positions in pg_stat_replication " +
				"(GRANT pg_monitor TO it), so nothing that waits for them is done")
		}
		if want.All && flushed == streaming || !want.All && flushed >= want.N {
			return nil
		}
		if !time.Now().Before(deadline) {
			need := want.N
			if want.All {
				need = streaming
			}
			return fmt.Errorf("%w: %d of %d standbys needed hold WAL %s (%d streaming)", ErrStandbysBehind,
				flushed, need, mark, streaming)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}
