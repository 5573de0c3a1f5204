package poller_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// postDoneFailsOnce fails the first MarkPostDone, as a store that blips
// (or a crash) right after the file was deleted.
type postDoneFailsOnce struct {
	store.Store
	once sync.Once
}

func (s *postDoneFailsOnce) MarkPostDone(ctx context.Context, source, path string, now time.Time) error {
	err := errors.New("store unreachable")
	failed := false
	s.once.Do(func() { failed = true })
	if failed {
		return err
	}
	return s.Store.MarkPostDone(ctx, source, path, now)
}

// TestNewUploadAfterAnUnrecordedDeleteIsIngested: a file is ingested and
// deleted, but the store does not record the delete (it blips, or the
// process dies between the two). The partner then uploads another file
// under the name with the same size and mtime (a re-generated file sent
// with its times preserved). It is ingested, not deleted unread as the
// version already ingested.
func TestNewUploadAfterAnUnrecordedDeleteIsIngested(t *testing.T) {
	for _, claims := range []bool{true, false} {
		name := "claimed"
		if !claims {
			name = "renames_refused"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			st := &postDoneFailsOnce{Store: newSQLite(t)}
			var src poller.Source = local.Source{}
			if !claims {
				src = refusingRenames{}
			}
			h := newHarnessOn(t, st, src, []string{dir}, func(c *poller.Config) { c.After = "delete" })
			first := remitFile(t, dir, "era.835", x12gen.Remit{Control: 4201, Trace: "SAMESIZE-A"})
			fi, _ := os.Stat(first)
			h.poll(t)
			if s := h.poll(t); s.Ingested != 1 || s.PostProcessed != 0 {
				t.Fatalf("first version: %+v", s)
			}
			if _, err := os.Stat(first); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the first version was not deleted: %v", err)
			}
			second := remitFile(t, dir, "era.835", x12gen.Remit{Control: 4202, Trace: "SAMESIZE-B"})
			if fi2, _ := os.Stat(second); fi2.Size() != fi.Size() {
				t.Fatalf("sizes %d and %d", fi.Size(), fi2.Size())
			}
			os.Chtimes(second, fi.ModTime(), fi.ModTime())
			for range 3 {
				h.poll(t)
			}
			if c := h.counts(t); c.Inbox["processed"] != 2 {
				t.Errorf("counts %+v: the second upload was not ingested", c)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
				t.Errorf("drop holds %v", left)
			}
		})
	}
}

// refusingRenames is a drop whose server refuses renames: no claims.
type refusingRenames struct{ local.Source }

func (refusingRenames) Rename(ctx context.Context, from, to string) error {
	return errors.New("permission denied")
}

// TestFailedPostProcessingOfARejectedFileIsRetried: a file that is read
// and rejected (not X12, or a bad OpenPGP message) is deleted or moved as
// an ingested one is; when that fails once, a later poll retries it
// (without reading the file again) instead of leaving it, claimed, in the
// drop for good. A file rejected unread (over max_file_size) stays.
func TestFailedPostProcessingOfARejectedFileIsRetried(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "junk.835", []byte("not x12 at all, and long enough to be no upload under way"))
	put(t, dir, "huge.835", make([]byte, 4096))
	src := &flaky{Source: local.Source{}}
	src.failRemove.Store(1)
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) { c.After, c.MaxFileSize = "delete", 1024 })
	h.poll(t)
	if st := h.poll(t); st.Ingested != 1 || st.PostProcessed != 0 {
		t.Fatalf("%+v", st)
	}
	for range 2 {
		h.poll(t)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 1 || filepath.Base(left[0]) != "huge.835" {
		t.Errorf("drop holds %v, want only the file rejected unread", left)
	}
	if c := h.counts(t); c.Inbox["rejected"] != 1 || c.Files["rejected"] != 2 || c.Sightings["duplicate"] != 0 {
		t.Errorf("counts %+v", c)
	}
}

// TestFailingDeleteOfAnUnclaimedFileIsVerifiedOnce: where the server
// refuses renames, a file ingested whose delete keeps failing is read
// again once, to check it is the version ingested, and then only its
// delete is retried: no download per poll.
func TestFailingDeleteOfAnUnclaimedFileIsVerifiedOnce(t *testing.T) {
	dir := t.TempDir()
	remitFile(t, dir, "era.835", x12gen.Remit{Control: 4401, Trace: "VERIFY-ONCE"})
	src := &flaky{Source: refusingRenames{}}
	src.failRemove.Store(3)
	h := newHarness(t, src, []string{dir}, func(c *poller.Config) { c.After = "delete" })
	for range 6 {
		h.poll(t)
	}
	if n := src.opens.Load(); n != 2 {
		t.Errorf("%d downloads, want 2 (the ingest, one check)", n)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("drop holds %v", left)
	}
	if c := h.counts(t); c.Inbox["processed"] != 1 || c.Sightings["duplicate"] != 0 {
		t.Errorf("counts %+v", c)
	}
}
