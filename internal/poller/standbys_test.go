package poller_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestDeleteWaitsForTheStandbys: on a PostgreSQL primary whose standby
// has not flushed a file's ingest (its replication stalled, as under
// ordinary lag before a failover), the file is ingested but stays in the
// drop, counted as waiting; once replication goes on, the next poll
// deletes it without ingesting it again. Deleted at once, a failover to
// that standby would have lost the payment with its file.
func TestDeleteWaitsForTheStandbys(t *testing.T) {
	primary, _ := testenv.PostgresHA(t)
	st := pgtest.NewAt(t, primary, postgres.Options{})
	dir := t.TempDir()
	h := newHarnessOn(t, st, local.Source{}, []string{dir}, func(c *poller.Config) {
		c.After = "delete"
		c.WaitForStandbys = func(ctx context.Context) error {
			return st.WaitForStandbys(ctx, postgres.Standbys{All: true}, 300*time.Millisecond)
		}
	})
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	// The file, under its name or the processing name its claim gave it.
	inDrop := func() bool {
		t.Helper()
		names, err := filepath.Glob(filepath.Join(dir, "a.835*"))
		if err != nil {
			t.Fatal(err)
		}
		return len(names) == 1
	}
	resume := pgtest.StallReplication(t, st)
	h.poll(t)
	if s := h.poll(t); s.Ingested != 1 || s.PostProcessed != 0 {
		t.Fatalf("with the standby behind: %+v, want the file ingested and left", s)
	}
	if !inDrop() {
		t.Fatal("the file was removed before the standby held its ingest")
	}
	if n := testutil.ToFloat64(h.m.PostProcessWaiting.WithLabelValues("acme")); n != 1 {
		t.Errorf("ediwatch_postprocess_waiting %v, want 1", n)
	}
	if s := h.poll(t); s.PostProcessed != 0 || s.Ingested != 0 {
		t.Fatalf("a second poll, the standby still behind: %+v", s)
	}
	if !inDrop() {
		t.Fatal("removed on the second poll, the standby still behind")
	}

	resume()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := h.poll(t)
		if s.Ingested != 0 {
			t.Fatalf("ingested again: %+v", s)
		}
		if s.PostProcessed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never deleted once the standby caught up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if inDrop() {
		t.Error("the file is still in the drop")
	}
	if n := testutil.ToFloat64(h.m.PostProcessWaiting.WithLabelValues("acme")); n != 0 {
		t.Errorf("ediwatch_postprocess_waiting %v after the delete, want 0", n)
	}
	if c := h.counts(t); c.Inbox["processed"] != 1 || c.Sightings["duplicate"] != 0 {
		t.Errorf("counts %+v: the file was processed more than once", c)
	}
}

// TestIngestNeverWaitsForTheStandbys: the wait for the standbys comes
// once a poll, after every ingest of the poll has committed, so that no
// ingest waits for it, one download at a time included; and the files
// whose wait fails all stay, counted as waiting, for the next poll.
func TestIngestNeverWaitsForTheStandbys(t *testing.T) {
	dir := t.TempDir()
	var h *harness
	var asked []int // processed sets when each wait began
	behind := true
	h = newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) {
		c.After, c.Downloads = "delete", 1
		c.WaitForStandbys = func(ctx context.Context) error {
			asked = append(asked, h.counts(t).Inbox["processed"])
			if behind {
				return errors.New("the standbys are behind")
			}
			return nil
		}
	})
	for i := range 3 {
		var b bytes.Buffer
		if _, err := (x12gen.Remit{Control: 700 + i, Trace: fmt.Sprintf("W%d-", i)}).Write(&b); err != nil {
			t.Fatal(err)
		}
		put(t, dir, fmt.Sprintf("w%d.835", i), b.Bytes())
	}
	h.poll(t)
	if s := h.poll(t); s.Ingested != 3 || s.PostProcessed != 0 {
		t.Fatalf("with the standbys behind: %+v, want three files ingested and left", s)
	}
	if len(asked) != 1 || asked[0] != 3 {
		t.Fatalf("the standbys were asked with %v sets processed, want once, after all 3", asked)
	}
	if n := testutil.ToFloat64(h.m.PostProcessWaiting.WithLabelValues("acme")); n != 3 {
		t.Errorf("ediwatch_postprocess_waiting %v, want 3", n)
	}
	behind = false
	h.p.SetClock(func() time.Time { return time.Now().Add(time.Hour) }) // past the pause after a failed wait
	if s := h.poll(t); s.PostProcessed != 3 || s.Ingested != 0 {
		t.Fatalf("the standbys caught up: %+v, want the three deleted", s)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "w*")); len(names) != 0 {
		t.Errorf("left in the drop: %v", names)
	}
}
