package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
)

// TestIngestionControlNumberWhileAnotherIngestReservesABlock: an
// ingestion that holds the write lock (a write begun during its file's
// parse) takes an acknowledgment's control number while another ingest of
// the same process reserves a block of the same sender's numbers, which
// waits for that write lock: the ingestion does not wait for the
// reservation, and the reservation succeeds once the ingestion commits,
// with numbers of its own.
func TestIngestionControlNumberWhileAnotherIngestReservesABlock(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "file:"+filepath.Join(t.TempDir(), "ediwatch.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const sender = "ZZ:US"
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "a", Size: 1, MTime: time.Unix(0, 0),
		SHA256: "x", CorrelationID: "c", Now: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Rollback()
	// The first write takes the write lock.
	if err := ing.AddSet(ctx, inbox.SetRecord{Key: "x12:K", ContentHash: "h", Type: "835"}); err != nil {
		t.Fatal(err)
	}
	reserve := s.ctl.Reserve
	reserving := make(chan struct{})
	s.ctl.Reserve = func(ctx context.Context, sender string, n int64) (int64, error) {
		close(reserving)
		return reserve(ctx, sender, n)
	}
	other := make(chan error, 1)
	var otherN int64
	go func() {
		var err error
		otherN, err = s.NextControlNumber(ctx, sender)
		other <- err
	}()
	<-reserving
	first, end, err := ing.NextControlNumbers(ctx, sender, 8)
	if err != nil || end-first != 8 {
		t.Fatalf("[%d, %d): %v, want 8 numbers", first, end, err)
	}
	if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatalf("the other ingest's reservation: %v", err)
	}
	if otherN >= first && otherN < end {
		t.Errorf("control number %d handed out twice: the ingestion took [%d, %d)", otherN, first, end)
	}
}
