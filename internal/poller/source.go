package poller

import (
	"context"
	"io"
	"time"
)

// Entry is a regular file in a listing, with the attributes the listing
// carried.
type Entry struct {
	Name  string // base name
	Path  string // the path the source knows it by
	Size  int64
	MTime time.Time
	// ID, when the source knows it, names the file itself rather than its
	// name (device and inode for a local file), so a name replaced by
	// another file of the same size and mtime is still told apart.
	ID string
}

// Same reports whether e and o are the same version of a file: same size,
// mtime and, when both know it, identity.
func (e Entry) Same(o Entry) bool {
	return e.Size == o.Size && e.MTime.Equal(o.MTime) && (e.ID == "" || o.ID == "" || e.ID == o.ID)
}

// Source is a drop: an SFTP server or a local directory. Implementations
// are safe for concurrent use; ctx cancellation aborts a call.
type Source interface {
	// List returns the regular files of dir, attributes included: one
	// listing, no stat per file.
	List(ctx context.Context, dir string) ([]Entry, error)
	// Stat returns the regular file at path, as List would (os.ErrNotExist
	// when there is none).
	Stat(ctx context.Context, path string) (Entry, error)
	// Open opens path for reading. Reads honour ctx: a cancelled ctx makes
	// a read in progress return promptly with ctx's error.
	Open(ctx context.Context, path string) (io.ReadCloser, error)
	// Remove deletes path.
	Remove(ctx context.Context, path string) error
	// Rename moves from to to and fails (os.ErrExist) when to exists.
	Rename(ctx context.Context, from, to string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(ctx context.Context, dir string) error
	// Close releases connections.
	Close() error
}
