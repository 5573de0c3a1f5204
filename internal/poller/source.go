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
}

// Source is a drop: an SFTP server or a local directory. Implementations
// are safe for concurrent use; ctx cancellation aborts a call.
type Source interface {
	// List returns the regular files of dir, attributes included: one
	// listing, no stat per file.
	List(ctx context.Context, dir string) ([]Entry, error)
	// Open opens path for reading.
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
