package poller_test

import (
	"context"
	"testing"

	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestReverifyIngestsWhatTheStoreLost: a file left in its drop (after:
// leave) and ingested is not asked about again while it stays unchanged.
// When the store loses that ingestion (a failover to a standby that never
// had it, here its rows deleted), polls go on trusting what the poller
// remembers until Reverify: the next poll then finds the file unknown and
// ingests it again, and a file the store still has is not.
func TestReverifyIngestsWhatTheStoreLost(t *testing.T) {
	dir := t.TempDir()
	st := drivertest.SQLite(t)
	h := newHarnessOn(t, st, local.Source{}, []string{dir}, nil)
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	put(t, dir, "b.835", storetest.Fixture(t, "835_regenerated.x12"))
	h.poll(t)
	if s := h.poll(t); s.Ingested != 2 {
		t.Fatalf("first ingest: %+v", s)
	}
	h.poll(t) // the ledger holds both final: the poller remembers it
	ctx := context.Background()
	// The store loses a.835's ingestion, and only it.
	for _, q := range []string{
		`DELETE FROM outbox WHERE correlation_id IN (SELECT correlation_id FROM remote_file WHERE path LIKE '%a.835')`,
		`DELETE FROM inbox WHERE path LIKE '%a.835'`,
		`DELETE FROM remote_file WHERE path LIKE '%a.835'`,
	} {
		if _, err := st.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if s := h.poll(t); s.Ingested != 0 {
		t.Fatalf("before Reverify: %+v", s)
	}
	h.p.Reverify()
	ingested := 0
	for range 3 {
		ingested += h.poll(t).Ingested
	}
	if ingested != 1 {
		t.Errorf("after Reverify: %d files ingested, want a.835 alone", ingested)
	}
	if c := h.counts(t); c.Files["ingested"] != 2 || c.Inbox["processed"] != 2 {
		t.Errorf("counts %+v", c)
	}
}
