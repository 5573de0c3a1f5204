package poller

import (
	"context"
	"io"
	"io/fs"
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
	// Skip, for an entry that is not a regular file, says what it is
	// (SkipKind): it is listed so that the poller reports it, and never
	// opened. Its other attributes are not set.
	Skip string
}

// SkipKind names what an entry of mode m is when it is not a regular file
// ("directory", "symlink", or "special" for a device, pipe or socket);
// "" for a regular file.
func SkipKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "special"
	}
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
	// listing, no stat per file; and its other entries (directories,
	// symlinks, special files) with only Name, Path and Skip set.
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
