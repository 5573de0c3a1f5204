// Package sourcetest is the suite every poller source passes.
package sourcetest

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/poller"
)

// Drop is a directory the test can write locally and the source reads as
// Remote.
type Drop struct {
	Local  string
	Remote string
}

// Run runs the suite. newDrop returns an empty directory private to the
// test.
func Run(t *testing.T, src poller.Source, newDrop func(t *testing.T) Drop) {
	ctx := context.Background()
	t.Run("ListRegularFilesWithAttributes", func(t *testing.T) {
		d := newDrop(t)
		mtime := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
		write(t, d, "a.835", "ISA*first")
		write(t, d, "b.x12", "ISA*second file")
		os.Chtimes(filepath.Join(d.Local, "a.835"), mtime, mtime)
		os.Mkdir(filepath.Join(d.Local, "sub"), 0o777)
		os.Symlink(filepath.Join(d.Local, "a.835"), filepath.Join(d.Local, "link.835"))
		all, err := src.List(ctx, d.Remote)
		if err != nil {
			t.Fatal(err)
		}
		var got []poller.Entry
		skipped := map[string]string{}
		for _, e := range all {
			if e.Skip != "" {
				skipped[e.Name] = e.Skip
			} else {
				got = append(got, e)
			}
		}
		if len(skipped) != 2 || skipped["sub"] != "directory" || skipped["link.835"] != "symlink" {
			t.Errorf("entries skipped %v, want sub a directory and link.835 a symlink", skipped)
		}
		slices.SortFunc(got, func(a, b poller.Entry) int {
			if a.Name < b.Name {
				return -1
			}
			return 1
		})
		if len(got) != 2 || got[0].Name != "a.835" || got[0].Size != 9 || got[0].Path != path.Join(d.Remote, "a.835") ||
			!got[0].MTime.Equal(mtime) || got[1].Size != 15 {
			t.Errorf("listing %+v (want two regular files; no directory, no symlink)", got)
		}
	})
	t.Run("StatMatchesListing", func(t *testing.T) {
		d := newDrop(t)
		write(t, d, "s.835", "ISA*stat")
		listed, err := src.List(ctx, d.Remote)
		if err != nil || len(listed) != 1 {
			t.Fatalf("list %v %v", listed, err)
		}
		got, err := src.Stat(ctx, path.Join(d.Remote, "s.835"))
		if err != nil || got.Name != "s.835" || got.Path != listed[0].Path || !got.Same(listed[0]) {
			t.Errorf("stat %+v %v, listed %+v", got, err, listed[0])
		}
		if _, err := src.Stat(ctx, path.Join(d.Remote, "none.835")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat of a missing file: %v", err)
		}
		// The name now holds another file: a new version.
		os.Remove(filepath.Join(d.Local, "s.835"))
		write(t, d, "s.835", "ISA*stat*but longer")
		if again, _ := src.Stat(ctx, path.Join(d.Remote, "s.835")); again.Same(listed[0]) {
			t.Errorf("a replaced file looks the same: %+v", again)
		}
	})
	t.Run("OpenReadsContent", func(t *testing.T) {
		d := newDrop(t)
		write(t, d, "c.835", "ISA*content*here~")
		rc, err := src.Open(ctx, path.Join(d.Remote, "c.835"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != "ISA*content*here~" {
			t.Errorf("read %q %v", b, err)
		}
		if _, err := src.Open(ctx, path.Join(d.Remote, "none.835")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("open of a missing file: %v", err)
		}
	})
	t.Run("RemoveRenameMkdir", func(t *testing.T) {
		d := newDrop(t)
		write(t, d, "d.835", "one")
		write(t, d, "e.835", "two")
		archive := path.Join(d.Remote, "archive", "2026")
		if err := src.MkdirAll(ctx, archive); err != nil {
			t.Fatal(err)
		}
		if err := src.Rename(ctx, path.Join(d.Remote, "d.835"), path.Join(archive, "d.835")); err != nil {
			t.Fatal(err)
		}
		write(t, d, "d.835", "again")
		err := src.Rename(ctx, path.Join(d.Remote, "d.835"), path.Join(archive, "d.835"))
		if !errors.Is(err, os.ErrExist) {
			t.Errorf("rename onto an existing file: %v, want os.ErrExist", err)
		}
		if b, _ := os.ReadFile(filepath.Join(d.Local, "archive", "2026", "d.835")); string(b) != "one" {
			t.Errorf("the archived file was replaced: %q", b)
		}
		if err := src.Remove(ctx, path.Join(d.Remote, "e.835")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(d.Local, "e.835")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("removed file still there: %v", err)
		}
	})
	t.Run("MissingDirectory", func(t *testing.T) {
		d := newDrop(t)
		if _, err := src.List(ctx, path.Join(d.Remote, "gone")); err == nil {
			t.Error("listing a missing directory succeeded")
		}
		// The source still works afterwards.
		if _, err := src.List(ctx, d.Remote); err != nil {
			t.Errorf("after an error: %v", err)
		}
	})
}

func write(t *testing.T, d Drop, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.Local, name), []byte(body), 0o666); err != nil {
		t.Fatal(err)
	}
}
