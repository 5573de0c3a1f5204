package process

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// BenchmarkDocuments835 processes a large multi-claim 835 (400 sets of 250
// claims with two lines each, about 60 MB) into payments, effects and
// 999s, beside the envelope reader alone over the same bytes in the same
// run. It reports documents (sets) and claims per second, MB/s, the ratio
// to the envelope-only throughput, and allocations per claim.
func BenchmarkDocuments835(b *testing.B) {
	const sets, claims = 400, 250
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{Interchanges: 4, SetsPerGroup: sets / 4, ClaimsPerSet: claims, LinesPerClaim: 2, EOL: "\n"}).Write(&buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	var envTime, docTime time.Duration
	var mallocs uint64
	var ms runtime.MemStats
	for b.Loop() {
		t0 := time.Now()
		rd := envelope.NewReader(bytes.NewReader(data), envelope.Options{})
		for {
			if _, err := rd.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		t2 := time.Now()
		n := 0
		_, err := File(context.Background(), bytes.NewReader(data), Config{ControlNumbers: &ack.MemoryControlNumbers{}},
			func(it Item) error {
				if it.Set != nil && it.Set.Status == Processed {
					n++
				}
				return nil
			})
		t3 := time.Now()
		if err != nil || n != sets {
			b.Fatalf("processed %d of %d: %v", n, sets, err)
		}
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		envTime += t1.Sub(t0)
		docTime += t3.Sub(t2)
	}
	iters := float64(b.N)
	mb := float64(len(data)) * iters / 1e6
	b.ReportMetric(sets*iters/docTime.Seconds(), "docs/s")
	b.ReportMetric(sets*claims*iters/docTime.Seconds(), "claims/s")
	b.ReportMetric(mb/docTime.Seconds(), "doc-MB/s")
	b.ReportMetric(mb/envTime.Seconds(), "envelope-MB/s")
	b.ReportMetric(envTime.Seconds()/docTime.Seconds(), "ratio-vs-envelope")
	b.ReportMetric(float64(mallocs)/iters/(sets*claims), "allocs/claim")
}
