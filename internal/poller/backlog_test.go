package poller_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestABacklogIsDeferredNotWaitedFor: a poll that takes max_files_per_poll
// files reports the rest as deferred, which makes the daemon's loop poll
// again at once (nextPoll); the last batch defers nothing.
func TestABacklogIsDeferredNotWaitedFor(t *testing.T) {
	dir := t.TempDir()
	for i := range 25 {
		var b bytes.Buffer
		x12gen.Remit{Control: 300 + i, Trace: fmt.Sprintf("DEF%d-", i)}.Write(&b)
		put(t, dir, fmt.Sprintf("era-%02d.835", i), b.Bytes())
	}
	h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) { c.MaxFilesPerPoll = 10 })
	h.poll(t) // observe
	for _, want := range []struct{ ingested, deferred int }{{10, 15}, {10, 5}, {5, 0}} {
		st := h.poll(t)
		if st.Ingested != want.ingested || st.Deferred != want.deferred {
			t.Errorf("poll: ingested %d deferred %d, want %d and %d", st.Ingested, st.Deferred, want.ingested, want.deferred)
		}
	}
}
