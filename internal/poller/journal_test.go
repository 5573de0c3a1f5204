package poller_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/journal"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestJournalRecordsEachRemovalFirst: with a journal, every file deleted
// has its line (source, ledger path, size, SHA-256, action) written
// before it goes; a journal that cannot be written keeps the file in the
// drop, ingested, for a later poll.
func TestJournalRecordsEachRemovalFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "journal")
	jw, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) { c.After, c.Journal = "delete", jw })
	data := storetest.Fixture(t, "835_canonical.x12")
	put(t, dir, "a.835", data)
	h.poll(t)
	if s := h.poll(t); s.PostProcessed != 1 {
		t.Fatalf("%+v", s)
	}
	f, _ := os.Open(path)
	entries, err := journal.Read(f, time.Time{})
	f.Close()
	sum := sha256.Sum256(data)
	if err != nil || len(entries) != 1 || entries[0].Source != "acme" || entries[0].Path != filepath.Join(dir, "a.835") ||
		entries[0].SHA256 != hex.EncodeToString(sum[:]) || entries[0].Size != int64(len(data)) || entries[0].Action != "delete" {
		t.Fatalf("journal %+v %v", entries, err)
	}

	jw.Close() // the journal's disk is gone
	put(t, dir, "b.835", storetest.Fixture(t, "835_regenerated.x12"))
	h.poll(t)
	if s := h.poll(t); s.Ingested != 1 || s.PostProcessed != 0 {
		t.Fatalf("with the journal unwritable: %+v", s)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "b.835*")); len(names) != 1 {
		t.Errorf("the file went without its journal line: %v", names)
	}
}
