// Package local is the local-directory source: a mounted drop read with
// the same contract as an SFTP one. Only regular files are listed; a
// symlink or special file is never opened.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ediwatch/ediwatch/internal/poller"
)

// Source reads directories of the local file system.
type Source struct{}

var _ poller.Source = Source{}

// List implements poller.Source.
func (Source) List(ctx context.Context, dir string) ([]poller.Entry, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]poller.Entry, 0, len(entries))
	for _, e := range entries {
		if kind := poller.SkipKind(e.Type()); kind != "" {
			out = append(out, poller.Entry{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Skip: kind})
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, entry(filepath.Join(dir, e.Name()), info))
	}
	return out, nil
}

func entry(path string, info fs.FileInfo) poller.Entry {
	e := poller.Entry{Name: info.Name(), Path: path, Size: info.Size(), MTime: info.ModTime()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		e.ID = fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	}
	return e
}

// Stat implements poller.Source.
func (Source) Stat(ctx context.Context, path string) (poller.Entry, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return poller.Entry{}, err
	}
	if !info.Mode().IsRegular() {
		return poller.Entry{}, fmt.Errorf("%s: not a regular file", path)
	}
	return entry(path, info), nil
}

// Open implements poller.Source. It refuses to follow a symlink swapped in
// after the listing.
func (Source) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}

// Remove implements poller.Source.
func (Source) Remove(ctx context.Context, path string) error { return os.Remove(path) }

// Rename implements poller.Source: it never replaces an existing file
// (os.ErrExist when to exists). It is one atomic renameat2(NOREPLACE)
// where the file system supports it, else a link then an unlink.
func (Source) Rename(ctx context.Context, from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		if err != nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
		}
		return nil
	}
	if err := os.Link(from, to); err != nil {
		return err
	}
	return os.Remove(from)
}

// MkdirAll implements poller.Source.
func (Source) MkdirAll(ctx context.Context, dir string) error { return os.MkdirAll(dir, 0o750) }

// Close implements poller.Source.
func (Source) Close() error { return nil }
