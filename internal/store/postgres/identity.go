package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
)

// ServerIdentity names the PostgreSQL server a connection reached: its
// cluster's system identifier and the timeline its WAL is on. A standby
// promoted by a failover has the system identifier of its primary and
// the next timeline.
type ServerIdentity struct {
	SystemID string
	Timeline uint32
}

func (id ServerIdentity) String() string {
	return fmt.Sprintf("system %s timeline %d", id.SystemID, id.Timeline)
}

// identitySQL reads the server's identity: the timeline is the first
// eight hex digits of the current WAL file's name (pg_control_checkpoint's
// lags a promotion until the next checkpoint).
const identitySQL = `SELECT system_identifier::text, pg_walfile_name(pg_current_wal_lsn()) FROM pg_control_system()`

// identityWatch compares the server each new connection reaches with the
// last one seen by this process, or, at its first, the one the store
// recorded, and tells onChange of a change.
type identityWatch struct {
	mu       sync.Mutex
	last     ServerIdentity
	onChange func(old, new ServerIdentity)
}

// afterConnect is the pool's AfterConnect: it never fails a connection
// (a standby, read-only, has no current WAL position; a role without
// pg_monitor may not read pg_control_system): what it cannot read it
// does not compare.
func (w *identityWatch) afterConnect(ctx context.Context, c *pgx.Conn) error {
	var id ServerIdentity
	var walfile string
	if err := c.QueryRow(ctx, identitySQL).Scan(&id.SystemID, &walfile); err != nil || len(walfile) < 8 {
		return nil
	}
	tl, err := strconv.ParseUint(walfile[:8], 16, 32)
	if err != nil {
		return nil
	}
	id.Timeline = uint32(tl)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == id {
		return nil
	}
	old := w.last
	if old == (ServerIdentity{}) {
		err := c.QueryRow(ctx, `SELECT system_identifier, timeline FROM server_identity WHERE id = 1`).
			Scan(&old.SystemID, &old.Timeline)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil // not migrated yet
		}
	}
	if _, err := c.Exec(ctx, `INSERT INTO server_identity (id, system_identifier, timeline, seen_at)
		VALUES (1, $1, $2, now()) ON CONFLICT (id) DO UPDATE SET system_identifier = excluded.system_identifier,
		timeline = excluded.timeline, seen_at = excluded.seen_at`, id.SystemID, int64(id.Timeline)); err != nil {
		return nil // compared again at the next connection
	}
	w.last = id
	if old != (ServerIdentity{}) && old != id && w.onChange != nil {
		go w.onChange(old, id)
	}
	return nil
}
