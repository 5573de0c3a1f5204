package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// readOnlyProbe is how long ReadOnly waits for the write lock: a writer
// holding it longer is proof enough that the database takes writes.
const readOnlyProbe = 500 * time.Millisecond

// ReadOnly reports whether the database takes no writes: opened read-only
// (mode=ro in the DSN), or a file, directory or file system the process
// may not write. Such a store answers every read and commits nothing; the
// daemon's /readyz fails at once. It asks with a write that changes
// nothing (it takes and gives back the write lock); while another writer
// holds the lock past readOnlyProbe, the database is taking writes.
func (s *Store) ReadOnly(ctx context.Context) (bool, error) {
	pctx, cancel := context.WithTimeout(ctx, readOnlyProbe)
	defer cancel()
	_, err := s.db.ExecContext(pctx, `UPDATE lease SET name = name WHERE 0`)
	var se *msqlite.Error
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY:
		return true, nil
	case errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY,
		pctx.Err() != nil && ctx.Err() == nil:
		return false, nil // another writer holds the lock
	}
	return false, fmt.Errorf("read-only check: %w", err)
}
