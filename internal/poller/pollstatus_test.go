package poller_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// TestPollStatusIsRecordedByTheLeaseHolder: each poll of a directory
// records its end in the store (every replica's console reads it): a
// good poll its time, a failed one its error (as logged, without the
// file's contents) counted today; a replica that does not hold the
// directory lease records nothing.
func TestPollStatusIsRecordedByTheLeaseHolder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	put(t, dir, "a.835", []byte("ISA*not read here"))
	st := newSQLite(t)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	h := newHarnessOn(t, st, local.Source{}, []string{dir}, func(c *poller.Config) { c.Holder = "replica-a"; c.LeaseTTL = time.Hour })
	h.p.SetClock(func() time.Time { return now })
	status := func() []store.PollStatus {
		t.Helper()
		got, err := st.PollStatuses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := status(); len(got) != 0 {
		t.Fatalf("before any poll: %+v", got)
	}
	h.poll(t)
	got := status()
	if len(got) != 1 || got[0].Source != "acme" || got[0].Directory != dir || got[0].Holder != "replica-a" ||
		!got[0].LastPollAt.Equal(now) || !got[0].LastOKAt.Equal(now) || got[0].LastError != "" || got[0].ErrorsToday(now) != 0 {
		t.Fatalf("after a good poll: %+v", got)
	}

	// Another replica polling the same directory meanwhile holds no lease.
	b := newHarnessOn(t, st, local.Source{}, []string{dir}, func(c *poller.Config) { c.Holder = "replica-b" })
	b.p.SetClock(func() time.Time { return now.Add(time.Minute) })
	b.poll(t)
	if got := status(); len(got) != 1 || got[0].Holder != "replica-a" || !got[0].LastPollAt.Equal(now) {
		t.Fatalf("a replica without the lease recorded: %+v", got)
	}

	// The directory goes: the listing fails.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	later := now.Add(5 * time.Minute)
	h.p.SetClock(func() time.Time { return later })
	if _, err := h.p.PollOnce(ctx); err == nil {
		t.Fatal("poll of a missing directory succeeded")
	}
	got = status()
	if len(got) != 1 || !got[0].LastPollAt.Equal(later) || !got[0].LastOKAt.Equal(now) ||
		!strings.HasPrefix(got[0].LastError, "list: ") || !strings.Contains(got[0].LastError, filepath.Base(dir)) ||
		!got[0].LastErrorAt.Equal(later) || got[0].ErrorsToday(later) != 1 {
		t.Fatalf("after a failed poll: %+v", got)
	}
}

// TestPollStatusOfALostLeaseIsLeftToTheNewHolder: a replica whose
// directory lease is taken over mid-poll records nothing when its poll
// ends: the directory's status stays the new holder's (its holder, its
// last poll, no error counted against a poll that succeeded).
func TestPollStatusOfALostLeaseIsLeftToTheNewHolder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	put(t, dir, "a.835", []byte("ISA*not read here"))
	st := newSQLite(t)
	src := &stalling{Source: local.Source{}, hook: func() {}}
	h := newHarnessOn(t, st, src, []string{dir}, func(c *poller.Config) {
		c.Holder, c.LeaseTTL = "first", 30*time.Millisecond
	})
	h.p.PollOnce(ctx) // lists a.835 once: the next poll downloads it
	thiefAt := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
	src.hook = func() {
		// The lease lapses while the download stalls; another replica
		// takes it and records its own poll.
		lease := "poll:acme:" + dir
		if _, _, err := st.AcquireLease(ctx, lease, "first", -time.Hour, time.Now().UTC()); err != nil {
			t.Error(err)
			return
		}
		// first's own renewal may take the lapsed lease back before the
		// thief does (for its 30ms, and then loses it on seeing its token
		// changed): the thief tries until it holds it.
		var token int64
		for ok := false; !ok; {
			var err error
			if token, ok, err = st.AcquireLease(ctx, lease, "thief", time.Hour, time.Now().UTC()); err != nil {
				t.Error(err)
				return
			}
		}
		if err := st.RecordPoll(ctx, "acme", dir, "thief", inbox.Fence{Name: lease, Token: token}, thiefAt, ""); err != nil {
			t.Error(err)
		}
	}
	if _, err := h.p.PollOnce(ctx); err == nil || !strings.Contains(err.Error(), "lease lost") {
		t.Fatalf("poll: %v, want the lost lease", err)
	}
	got, err := st.PollStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Holder != "thief" || !got[0].LastPollAt.Equal(thiefAt) || got[0].LastError != "" ||
		got[0].ErrorsToday(thiefAt) != 0 {
		t.Errorf("the replica that lost its lease overwrote the new holder's poll status: %+v", got)
	}
}

// listFails is a source whose listing fails with err.
type listFails struct {
	poller.Source
	err error
}

func (l listFails) List(context.Context, string) ([]poller.Entry, error) { return nil, l.err }

// TestPollErrorFromTheServerIsRecordedOnEveryDriver: a listing error
// carries text the SFTP server chose (its status message), which may
// hold a NUL or other control bytes. The poll status still records it,
// on PostgreSQL too (whose text refuses NUL), with the control bytes
// shown as U+FFFD.
func TestPollErrorFromTheServerIsRecordedOnEveryDriver(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		dir := t.TempDir()
		src := listFails{Source: local.Source{}, err: errors.New("sftp: \"no\x00such\x1b[31m\r\nfile\" (SSH_FX_FAILURE)")}
		h := newHarnessOn(t, st, src, []string{dir}, nil)
		if _, err := h.p.PollOnce(ctx); err == nil {
			t.Fatal("the poll succeeded")
		}
		got, err := st.PollStatuses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].LastError != "list: sftp: \"no\uFFFDsuch\uFFFD[31m\uFFFD\uFFFDfile\" (SSH_FX_FAILURE)" {
			t.Errorf("poll status %+v", got)
		}
	})
}
