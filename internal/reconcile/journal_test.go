package reconcile

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/journal"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestJournalNamesRemovedFilesTheStoreLacks: of the files a journal says
// were removed from a drop, those whose version the ledger holds pass;
// one the ledger has no row of, and one whose row names another version
// recorded before the removal, are reported and make the report
// divergent; one whose row names a later upload of the path cannot be
// told and is counted apart.
func TestJournalNamesRemovedFilesTheStoreLacks(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	for _, f := range []string{"a.835", "b.835"} {
		if _, err := storetest.Ingest(t, st, f, storetest.Fixture(t, "835_canonical.x12")); err != nil {
			t.Fatal(err)
		}
	}
	// storetest.Ingest records source "test", sha "sha-PATH", at its t0.
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	entry := func(path, sha string, at time.Time) journal.Entry {
		return journal.Entry{At: at, Source: "test", Path: path, Size: 1, SHA256: sha, Action: "delete"}
	}
	entries := []journal.Entry{
		entry("a.835", "sha-a.835", t0.Add(time.Minute)),
		entry("gone.835", "sha-gone", t0.Add(time.Minute)),
		entry("b.835", "sha-earlier", t0.Add(-time.Hour)),
		entry("b.835", "sha-lost", t0.Add(time.Hour)),
	}
	rep := &Report{}
	if err := CheckJournal(ctx, st, entries, rep); err != nil {
		t.Fatal(err)
	}
	j := rep.Journal
	if j.Checked != 4 || j.Superseded != 1 || len(j.Unknown) != 2 || j.Unknown[0].Path != "gone.835" ||
		j.Unknown[1].SHA256 != "sha-lost" {
		t.Fatalf("journal check %+v", j)
	}
	if !rep.Divergent || len(rep.Reasons) != 1 || !strings.Contains(rep.Reasons[0], "2 files removed") {
		t.Errorf("divergent %v, reasons %v", rep.Divergent, rep.Reasons)
	}
	var out bytes.Buffer
	rep.Print(&out)
	if !strings.Contains(out.String(), "gone.835") || !strings.Contains(out.String(), "NOT IN THE STORE") {
		t.Errorf("printed:\n%s", out.String())
	}
	clean := &Report{}
	if err := CheckJournal(ctx, st, entries[:1], clean); err != nil || clean.Divergent || len(clean.Journal.Unknown) != 0 {
		t.Errorf("a journal the store agrees with: %+v %v", clean.Journal, err)
	}
}
