package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// BenchResendManyInterchanges ingests a file of 2,000 one-set
// interchanges, then of 8,000, each into a store of its own (newStore),
// and each a second time (every set a duplicate, every group its own
// 999), and reports the second ingests' times and the ratio of their
// times per interchange: about 1 when a re-send's time grows with its
// interchanges, 4 when with their square (migration 0015: each group's
// 999 once read every sighting of the file).
func BenchResendManyInterchanges(b *testing.B, newStore func(testing.TB) store.Store) {
	ctx := context.Background()
	for b.Loop() {
		var again [2]time.Duration
		for i, n := range []int{2000, 8000} {
			var buf bytes.Buffer
			if _, err := (x12gen.Remit{Control: 1, Interchanges: n, Trace: "R"}).Write(&buf); err != nil {
				b.Fatal(err)
			}
			data := buf.Bytes()
			s := newStore(b)
			for pass := range 2 {
				start := time.Now()
				r, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: Routes},
					inbox.FileInfo{Source: "bench", Path: "resend.835", Size: int64(len(data)), MTime: t0,
						SHA256: "x", CorrelationID: store.NewCorrelationID(), Now: time.Now()}, bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				want := inbox.Processed
				if pass == 1 {
					want, again[i] = inbox.Duplicate, time.Since(start)
				}
				if got := r.Count(want); got != n {
					b.Fatalf("%d interchanges, pass %d: %d sets %s", n, pass+1, got, want)
				}
			}
		}
		b.ReportMetric(float64(again[0].Milliseconds()), "again-2k-ms")
		b.ReportMetric(float64(again[1].Milliseconds()), "again-8k-ms")
		b.ReportMetric(again[1].Seconds()/4/again[0].Seconds(), "ratio-per-interchange")
	}
}
