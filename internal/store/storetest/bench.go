package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// BareInsert is one single-row INSERT committed on its own, on the same
// database the store uses: the baseline an ingest is compared with.
type BareInsert func(ctx context.Context, v int64) error

// BenchIngestVsBareCommit measures, for 1, 4 and 16 concurrent writers,
// ingests per second of distinct one-set 835 files beside bare
// INSERT+COMMITs per second on the same database and connection count, in
// the same run, each for d, and reports the ratios (goal >= 0.6).
func BenchIngestVsBareCommit(b *testing.B, s store.Store, bare BareInsert, d time.Duration) {
	var seq atomic.Int64
	ctx := context.Background()
	rate := func(writers int, op func() error) float64 {
		var n atomic.Int64
		deadline := time.Now().Add(d)
		var wg sync.WaitGroup
		start := time.Now()
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if err := op(); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	ingestOne := func() error {
		i := seq.Add(1)
		var buf bytes.Buffer
		if _, err := (x12gen.Remit{Control: int(i), Trace: fmt.Sprintf("B%d-", i)}).Write(&buf); err != nil {
			return err
		}
		r, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: Routes}, inbox.FileInfo{Source: "bench",
			Path: fmt.Sprintf("f%d", i), Size: int64(buf.Len()), MTime: t0, SHA256: "x", CorrelationID: "c",
			Now: time.Now()}, bytes.NewReader(buf.Bytes()))
		if err == nil && r.Count(inbox.Processed) != 1 {
			err = fmt.Errorf("file %d not processed: %+v", i, r.Sets)
		}
		return err
	}
	for b.Loop() {
		for _, w := range []int{1, 4, 16} {
			bareRate := rate(w, func() error { return bare(ctx, seq.Add(1)) })
			ingestRate := rate(w, ingestOne)
			b.ReportMetric(bareRate, fmt.Sprintf("bare-commits/s-%dw", w))
			b.ReportMetric(ingestRate, fmt.Sprintf("ingests/s-%dw", w))
			b.ReportMetric(ingestRate/bareRate, fmt.Sprintf("ratio-%dw", w))
		}
	}
}
