package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testLastFileTimes: the silence alarm's reading is, per source, when its
// newest file was recorded, ingested or rejected; a file that only failed
// (retrying) is no sign of life, and a source with no file has no entry.
func testLastFileTimes(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got, err := s.LastFileTimes(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v %v", got, err)
	}
	mustIngest(t, s, "in/a.835", paymentFile(t, 0, 1000)) // source "test", at t0
	later := t0.Add(3 * time.Hour)
	if _, err := s.RecordFileProblem(ctx, inbox.FileInfo{Source: "test", Path: "in/b.835", Size: 1, MTime: later,
		CorrelationID: "c1", Now: later}, inbox.FileRetrying, "connection reset"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordFileProblem(ctx, inbox.FileInfo{Source: "other", Path: "in/big.835", Size: 1, MTime: later,
		CorrelationID: "c2", Now: later.Add(time.Hour)}, inbox.FileRejected, "larger than max_file_size"); err != nil {
		t.Fatal(err)
	}
	got, err := s.LastFileTimes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got["test"].Equal(t0) || !got["other"].Equal(later.Add(time.Hour)) {
		t.Errorf("last file times %v, want test at %v (its retrying file is not one) and other at %v",
			got, t0, later.Add(time.Hour))
	}
}

// testLastFileTimesIgnorePostProcessing: post-processing (delete, move) of a
// file ingested long ago, e.g. once a broken archive directory is fixed, is
// no new file: the silence alarm's reading stays at the file's ingest.
func testLastFileTimesIgnorePostProcessing(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustIngest(t, s, "in/a.835", paymentFile(t, 0, 1000)) // source "test", at t0
	if err := s.MarkPostDone(ctx, "test", "in/a.835", t0.Add(30*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := s.LastFileTimes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !got["test"].Equal(t0) {
		t.Errorf("last file of test at %v, want %v: moving an old file is not a new one", got["test"], t0)
	}
}
