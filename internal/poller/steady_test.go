package poller_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// askCounter is a store that records which paths the poller asks the
// ledger about.
type askCounter struct {
	store.Store
	mu    sync.Mutex
	asked []string
}

func (a *askCounter) FileStates(ctx context.Context, source string, paths []string) (map[string]inbox.FileState, error) {
	a.mu.Lock()
	a.asked = append(a.asked, paths...)
	a.mu.Unlock()
	return a.Store.FileStates(ctx, source, paths)
}

// take returns the paths asked since the last call.
func (a *askCounter) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.asked
	a.asked = nil
	slices.Sort(out)
	return out
}

func remitFile(t *testing.T, dir, name string, r x12gen.Remit) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	put(t, dir, name, b.Bytes())
	return filepath.Join(dir, name)
}

// TestSteadyPollAsksTheLedgerOnlyAboutChangedFiles: once the ledger has
// said a file is final (after: leave), polls that list it unchanged skip
// it without asking the ledger again; a new version at the same path (other
// size or mtime) is asked about, observed and ingested like any new file,
// and a file that is gone is forgotten.
func TestSteadyPollAsksTheLedgerOnlyAboutChangedFiles(t *testing.T) {
	dir := t.TempDir()
	a := remitFile(t, dir, "a.835", x12gen.Remit{Control: 100, Trace: "STEADYA"})
	b := remitFile(t, dir, "b.835", x12gen.Remit{Control: 200, Trace: "STEADYB"})
	st := &askCounter{Store: newSQLite(t)}
	h := newHarnessOn(t, st, local.Source{}, []string{dir}, nil)
	h.poll(t) // observe
	if s := h.poll(t); s.Ingested != 2 {
		t.Fatalf("ingest poll: %+v", s)
	}
	h.poll(t) // the ledger says both are final
	st.take()
	if s := h.poll(t); s.Skipped != 2 || s.Downloaded != 0 {
		t.Fatalf("steady poll: %+v", s)
	}
	if asked := st.take(); len(asked) != 0 {
		t.Fatalf("steady poll asked the ledger about %v", asked)
	}

	// A new version of b: other content, size and mtime.
	remitFile(t, dir, "b.835", x12gen.Remit{Control: 300, Trace: "STEADYC", ClaimsPerSet: 3})
	later := time.Now().Add(-time.Hour).Truncate(time.Second) // another mtime, old enough
	if err := os.Chtimes(b, later, later); err != nil {
		t.Fatal(err)
	}
	if s := h.poll(t); s.Downloaded != 0 || s.Skipped != 2 {
		t.Fatalf("new version must be observed first: %+v", s)
	}
	if asked := st.take(); !slices.Equal(asked, []string{b}) {
		t.Fatalf("asked %v, want only %s", asked, b)
	}
	if s := h.poll(t); s.Ingested != 1 || s.Downloaded != 1 {
		t.Fatalf("new version not ingested: %+v", s)
	}
	h.poll(t)
	st.take()
	if s := h.poll(t); s.Skipped != 2 || s.Downloaded != 0 {
		t.Fatalf("steady poll after the new version: %+v", s)
	}
	if asked := st.take(); len(asked) != 0 {
		t.Fatalf("steady poll asked the ledger about %v", asked)
	}

	// a is gone, then comes back unchanged in size but with a new mtime.
	data, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(a)
	if s := h.poll(t); s.Skipped != 1 || s.Listed != 1 {
		t.Fatalf("poll without a: %+v", s)
	}
	put(t, dir, "a.835", data)
	if err := os.Chtimes(a, later, later); err != nil {
		t.Fatal(err)
	}
	st.take()
	h.poll(t)
	if asked := st.take(); !slices.Equal(asked, []string{a}) {
		t.Fatalf("asked %v, want only %s", asked, a)
	}
	if s := h.poll(t); s.Downloaded != 1 {
		t.Fatalf("a's new mtime must be taken again: %+v", s)
	}
	if c := h.counts(t); c.Inbox["processed"] != 3 || c.Sightings["duplicate"] != 1 {
		t.Errorf("counts %+v", c)
	}
}
