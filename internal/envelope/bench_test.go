package envelope

import (
	"bytes"
	"crypto/sha256"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/x12gen"
)

var (
	bigOnce sync.Once
	big835  []byte
	bigSegs int
)

// large835 is a ~117 MB 835: 4,000 sets of 90 claims with two lines each.
func large835(b *testing.B) []byte {
	bigOnce.Do(func() {
		var buf bytes.Buffer
		n, err := x12gen.Remit{Interchanges: 40, SetsPerGroup: 100, ClaimsPerSet: 90, LinesPerClaim: 2, EOL: "\n"}.Write(&buf)
		if err != nil {
			panic(err)
		}
		big835, bigSegs = buf.Bytes(), n
	})
	return big835
}

func drain(r io.Reader) (sets int, err error) { return drainWith(r, Options{}) }

func drainWith(r io.Reader, opts Options) (sets int, err error) {
	rd := NewReader(r, opts)
	for {
		k, err := rd.Next()
		if err == io.EOF {
			return sets, nil
		}
		if err != nil {
			return sets, err
		}
		if k == KindSet {
			sets++
		}
	}
}

// BenchmarkParseVsSHA256 measures parsing, keying and content-hashing an
// 835 of at least 100 MB beside crypto/sha256 over the same bytes, in the
// same run, and reports the ratio of their throughputs (goal >= 0.5) and
// the allocations per segment.
func BenchmarkParseVsSHA256(b *testing.B) {
	data := large835(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var shaTime, parseTime, shaCPU, parseCPU time.Duration
	var mallocs uint64
	var ms runtime.MemStats
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		c0 := threadCPU()
		t0 := time.Now()
		sha256.Sum256(data)
		t1 := time.Now()
		c1 := threadCPU()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		c2 := threadCPU()
		t2 := time.Now()
		if _, err := drain(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		c3 := threadCPU()
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		shaTime += t1.Sub(t0)
		parseTime += t3.Sub(t2)
		shaCPU += c1 - c0
		parseCPU += c3 - c2
	}
	if parseCPU > 0 {
		// The same ratio in CPU time of the benchmark's thread: steadier
		// than wall time on a shared machine.
		b.ReportMetric(shaCPU.Seconds()/parseCPU.Seconds(), "cpu-ratio-vs-sha256")
	}
	mb := float64(len(data)) * float64(b.N) / 1e6
	b.ReportMetric(mb/shaTime.Seconds(), "sha256-MB/s")
	b.ReportMetric(mb/parseTime.Seconds(), "parse-MB/s")
	b.ReportMetric(shaTime.Seconds()/parseTime.Seconds(), "ratio-vs-sha256")
	b.ReportMetric(float64(mallocs)/float64(b.N)/float64(bigSegs), "allocs/segment")
}

// BenchmarkParseModesVsSHA256 is BenchmarkParseVsSHA256 for the other
// ways the reader is run: keeping each set's segments (inspect --json and
// the second pass of an ingest) and without the content hash (a pass that
// needs only the envelope's verdicts).
func BenchmarkParseModesVsSHA256(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
		gen  x12gen.Remit
	}{
		{"keep", Options{KeepSegments: true}, x12gen.Remit{}},
		{"nohash", Options{NoContentHash: true}, x12gen.Remit{}},
		// A component separator other than ':' (common in 837s): every
		// segment's normal form differs from its bytes.
		{"other-delimiters", Options{}, x12gen.Remit{Interchanges: 10, SetsPerGroup: 100, ClaimsPerSet: 90, LinesPerClaim: 2,
			Element: '*', Component: '>', Repetition: '^', Segment: '~', EOL: "\n"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data := large835(b)
			if bc.gen.Interchanges > 0 {
				var buf bytes.Buffer
				if _, err := bc.gen.Write(&buf); err != nil {
					b.Fatal(err)
				}
				data = buf.Bytes()
			}
			b.SetBytes(int64(len(data)))
			var shaTime, parseTime, shaCPU, parseCPU time.Duration
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for b.Loop() {
				c0 := threadCPU()
				t0 := time.Now()
				sha256.Sum256(data)
				t1 := time.Now()
				c1 := threadCPU()
				if _, err := drainWith(bytes.NewReader(data), bc.opts); err != nil {
					b.Fatal(err)
				}
				shaTime += t1.Sub(t0)
				parseTime += time.Since(t1)
				c2 := threadCPU()
				shaCPU += c1 - c0
				parseCPU += c2 - c1
			}
			b.ReportMetric(shaTime.Seconds()/parseTime.Seconds(), "ratio-vs-sha256")
			if parseCPU > 0 {
				b.ReportMetric(shaCPU.Seconds()/parseCPU.Seconds(), "cpu-ratio-vs-sha256")
			}
		})
	}
}

// BenchmarkPeakHeap streams generated 835s of 16 MB and 256 MB through the
// reader and reports the peak heap in use above the heap before the run:
// it must not grow with the file.
func BenchmarkPeakHeap(b *testing.B) {
	for _, tc := range []struct {
		name string
		sets int
	}{{"16MB", 25}, {"256MB", 400}} {
		b.Run(tc.name, func(b *testing.B) {
			var peak uint64
			for b.Loop() {
				runtime.GC()
				var base runtime.MemStats
				runtime.ReadMemStats(&base)
				stop := make(chan struct{})
				done := make(chan uint64)
				go func() {
					var ms runtime.MemStats
					var p uint64
					t := time.NewTicker(2 * time.Millisecond)
					defer t.Stop()
					for {
						runtime.ReadMemStats(&ms)
						p = max(p, ms.HeapInuse)
						select {
						case <-stop:
							done <- p
							return
						case <-t.C:
						}
					}
				}()
				r := x12gen.Remit{Interchanges: tc.sets, SetsPerGroup: 1, ClaimsPerSet: 2000, LinesPerClaim: 2, EOL: "\n"}.Reader()
				if _, err := drain(r); err != nil {
					b.Fatal(err)
				}
				r.Close()
				close(stop)
				if p := <-done; p > base.HeapInuse {
					peak = max(peak, p-base.HeapInuse)
				}
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// BenchmarkParse is the reader alone over the large 835, for profiling.
func BenchmarkParse(b *testing.B) {
	data := large835(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := drain(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
