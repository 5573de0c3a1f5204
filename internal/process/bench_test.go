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
	"github.com/ediwatch/ediwatch/internal/x12/claim"
	"github.com/ediwatch/ediwatch/internal/x12/remit"
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

// BenchmarkPaymentDocuments measures the 835 document model alone, on the
// sets of the file BenchmarkDocuments835 reads (read once, beforehand):
// remit.Parse, then Parse and the payment.posted effect (the payload
// encoded and hashed), in claims per second and allocations per claim.
func BenchmarkPaymentDocuments(b *testing.B) {
	const sets, claims = 40, 250
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: sets, ClaimsPerSet: claims, LinesPerClaim: 2, EOL: "\n"}).Write(&buf); err != nil {
		b.Fatal(err)
	}
	type set struct {
		ix   *envelope.Interchange
		s    *envelope.Set
		segs []envelope.Segment
	}
	var all []set
	rd := envelope.NewReader(bytes.NewReader(buf.Bytes()), envelope.Options{KeepSegments: true})
	for {
		k, err := rd.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
		if k == envelope.KindSet {
			var segs []envelope.Segment
			for _, s := range rd.Set().Segments() {
				segs = append(segs, s.Clone())
			}
			all = append(all, set{rd.Interchange(), rd.Set(), segs})
		}
	}
	for _, mode := range []string{"parse", "parse+effect"} {
		b.Run(mode, func(b *testing.B) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			t0 := time.Now()
			for b.Loop() {
				for _, st := range all {
					p, probs := remit.Parse(st.segs)
					if len(probs) > 0 || !p.Balance.Balanced {
						b.Fatal(probs, p.Balance)
					}
					if mode == "parse+effect" {
						s := &Set{Key: st.s.Key, ContentHash: "h", Payment: p}
						if e := effects(st.ix, s, nil); len(e) != 1 {
							b.Fatal(e)
						}
					}
				}
			}
			d := time.Since(t0)
			runtime.ReadMemStats(&ms)
			n := float64(b.N) * sets * claims
			b.ReportMetric(n/d.Seconds(), "claims/s")
			b.ReportMetric(float64(ms.Mallocs-before)/n, "allocs/claim")
		})
	}
}

// BenchmarkClaimDocuments measures the 837 document model alone: one set
// of 2,000 claims (two lines each, read once, beforehand) through
// claim.Parse, then Parse and the claim.received effects (payload, hash,
// effect and ordering keys), in claims per second and allocations per
// claim.
func BenchmarkClaimDocuments(b *testing.B) {
	const claims = 2000
	var buf bytes.Buffer
	if err := (x12gen.Claims{Claims: claims}).Write(&buf); err != nil {
		b.Fatal(err)
	}
	rd := envelope.NewReader(bytes.NewReader(buf.Bytes()), envelope.Options{KeepSegments: true})
	var ix *envelope.Interchange
	var key string
	var segs []envelope.Segment
	for {
		k, err := rd.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
		if k == envelope.KindSet {
			ix, key = rd.Interchange(), rd.Set().Key
			for _, s := range rd.Set().Segments() {
				segs = append(segs, s.Clone())
			}
		}
	}
	for _, mode := range []string{"parse", "parse+effects"} {
		b.Run(mode, func(b *testing.B) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			t0 := time.Now()
			for b.Loop() {
				cs, probs := claim.Parse(segs)
				if len(probs) > 0 || len(cs) != claims {
					b.Fatal(len(cs), probs)
				}
				if mode == "parse+effects" {
					if e := effects(ix, &Set{Key: key, Claims: cs}, nil); len(e) != claims {
						b.Fatal(len(e))
					}
				}
			}
			d := time.Since(t0)
			runtime.ReadMemStats(&ms)
			n := float64(b.N) * claims
			b.ReportMetric(n/d.Seconds(), "claims/s")
			b.ReportMetric(float64(ms.Mallocs-before)/n, "allocs/claim")
		})
	}
}

// BenchmarkFileManyInterchanges processes generated 835s of 10,000 and
// 40,000 interchanges of one small set each (a day of single-payment
// interchanges concatenated) and reports the heap still live when the
// last set is emitted (after a collection, above the heap before the
// run, the file's bytes aside): it must not grow with the number of
// interchanges and groups beyond a few words of verdict each (what grows
// with the sets is the caller's: File keeps none).
// Run: go test ./internal/process -run XXX -bench FileManyInterchanges -benchtime 1x
func BenchmarkFileManyInterchanges(b *testing.B) {
	for _, tc := range []struct {
		name string
		n    int
	}{{"10k", 10_000}, {"40k", 40_000}} {
		b.Run(tc.name, func(b *testing.B) {
			r := x12gen.Remit{Interchanges: tc.n, SetsPerGroup: 1, ClaimsPerSet: 1, LinesPerClaim: 1, EOL: "\n"}.Reader()
			data, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				b.Fatal(err)
			}
			cfg := Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 1}, Ack: ack.Options{Now: fixedNow}}
			var live int64
			for b.Loop() {
				runtime.GC()
				var base, last runtime.MemStats
				runtime.ReadMemStats(&base)
				sets := 0
				if _, err := File(context.Background(), bytes.NewReader(data), cfg, func(it Item) error {
					if it.Set != nil {
						if sets++; sets == tc.n {
							runtime.GC()
							runtime.ReadMemStats(&last)
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				if sets != tc.n {
					b.Fatalf("%d sets processed, want %d", sets, tc.n)
				}
				live = max(live, int64(last.HeapAlloc)-int64(base.HeapAlloc))
			}
			b.ReportMetric(float64(live)/(1<<20), "live-heap-MB")
			b.ReportMetric(float64(len(data))/(1<<20), "file-MB")
		})
	}
}
