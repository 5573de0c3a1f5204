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
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, poller.Entry{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Size: info.Size(), MTime: info.ModTime()})
	}
	return out, nil
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
// (link, then unlink; os.ErrExist when to exists).
func (Source) Rename(ctx context.Context, from, to string) error {
	if err := os.Link(from, to); err != nil {
		return err
	}
	return os.Remove(from)
}

// MkdirAll implements poller.Source.
func (Source) MkdirAll(ctx context.Context, dir string) error { return os.MkdirAll(dir, 0o750) }

// Close implements poller.Source.
func (Source) Close() error { return nil }
