package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// cancelingStore's ingestions cancel their ingest, on a goroutine of its
// own, once their set number at is added: the cancellation lands while
// the write's next statements run.
type cancelingStore struct {
	store.Store
	at     int
	cancel context.CancelFunc
}

func (c *cancelingStore) BeginIngest(ctx context.Context, fi inbox.FileInfo) (inbox.Ingestion, error) {
	ing, err := c.Store.BeginIngest(ctx, fi)
	return &cancelingIngestion{Ingestion: ing, s: c}, err
}

type cancelingIngestion struct {
	inbox.Ingestion
	s    *cancelingStore
	sets int
}

func (c *cancelingIngestion) AddSet(ctx context.Context, r inbox.SetRecord) error {
	err := c.Ingestion.AddSet(ctx, r)
	if c.sets++; c.sets == c.s.at {
		go c.s.cancel()
	}
	return err
}

// TestIngestCanceledWhileItsWriteRunsRecordsNothing: an ingest canceled
// while its write runs statements (written while parsed, or after), at
// its first set, in its middle or at its last, returns the cancellation
// and records nothing; the file is then ingested in full.
func TestIngestCanceledWhileItsWriteRunsRecordsNothing(t *testing.T) {
	data := pipedFile(t, "CM")
	for _, pipeFrom := range []int{0, 1} {
		for _, at := range []int{1, 7, 60, 119, 120} {
			t.Run(fmt.Sprint("pipeFrom", pipeFrom, "at", at), func(t *testing.T) {
				eachStore(t, func(t *testing.T, s store.Store) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					c := &cancelingStore{Store: s, at: at, cancel: cancel}
					r, err := ingestWith(ctx, c, pipeFrom, "f", bytes.NewReader(data), len(data))
					switch {
					case err == nil && r.Count(inbox.Processed) == 120:
						// Canceled after its last statement: committed whole.
						t.Logf("committed before the cancellation")
						return
					case !errors.Is(err, context.Canceled):
						t.Fatalf("ingest: %v, want context.Canceled", err)
					}
					nothingRecorded(t, s)
					r, err = ingestWith(context.Background(), s, pipeFrom, "f", bytes.NewReader(data), len(data))
					if err != nil || r.Count(inbox.Processed) != 120 {
						t.Fatalf("then: %v", err)
					}
				})
			})
		}
	}
}
