package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestProgressStoreIngestsAFileWrittenWhileParsed: the poll loop's store
// (progressStore, as `ediwatch run` wraps it) ingests into SQLite a file
// written while it is parsed (inbox.Options.PipeFrom 1), its 999 included:
// the wrapped ingestion still hands the parse its control numbers
// (inbox.Ingestion.NextControlNumbers), so the parse never reserves them from the
// store, whose write lock that very ingestion holds.
func TestProgressStoreIngestsAFileWrittenWhileParsed(t *testing.T) {
	ctx := context.Background()
	// A short busy timeout: the failure is an ingest that waited for its
	// own write lock.
	st, err := sqlite.Open(ctx, "file:"+filepath.Join(t.TempDir(), "ediwatch.db")+"?_busy_timeout=3000")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r := &readiness{now: time.Now}
	ps := progressStore{Store: st, p: r.loop("poll loop acme", time.Minute)}
	// 1000 sets: their records outgrow the pipe's buffer, so the write
	// holds the lock, before the parse reaches the group's 999.
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 1000, Trace: "PIPED"}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	res, err := inbox.Ingest(ctx, inbox.Options{Store: ps, Routes: storetest.Routes, PipeFrom: 1},
		inbox.FileInfo{Source: "acme", Path: "big.835", Size: int64(buf.Len()), MTime: time.Now().UTC(),
			SHA256: "sha", CorrelationID: store.NewCorrelationID(), Now: time.Now().UTC()}, bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if res.Count(inbox.Processed) != 1000 || len(res.AckKeys) != 1 {
		t.Errorf("processed %d, acks %v", res.Count(inbox.Processed), res.AckKeys)
	}
}
