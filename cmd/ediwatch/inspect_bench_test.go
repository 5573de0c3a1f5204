package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// big835 writes, once per benchmark, the 835 of issue 14: 60,580 sets of 8
// claims (124 MB), straight to a file so the benchmark's own memory is not
// the file's.
func big835(b *testing.B) (string, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "big.835")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := (x12gen.Remit{SetsPerGroup: 60580, ClaimsPerSet: 8, EOL: "\n"}).Write(w); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	return path, st.Size()
}

// heapPeak samples the live heap every few milliseconds until stopped and
// returns its peak in bytes.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak }
}

// vmHWM returns the process's peak resident set in bytes (Linux), or 0.
func vmHWM() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkInspect100MB runs `inspect --json` and the text form in
// process on the 124 MB 835 of issue 14, beside crypto/sha256 over the same
// file and the sha256sum command (when installed) in the same run, and
// reports the throughputs, the ratios (the goal is >= 0.5 against
// sha256sum; crypto/sha256 in process is several times faster than it) and
// the peak heap (goal: bounded, far under 64 MB).
func BenchmarkInspect100MB(b *testing.B) {
	path, size := big835(b)
	for _, bc := range []struct {
		name string
		opts inspectOptions
	}{
		{"json", inspectOptions{json: true, workers: inspectWorkers()}},
		{"json-inline", inspectOptions{json: true}},
		{"text", inspectOptions{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			var shaTime, sumTime, inspectTime time.Duration
			var peak uint64
			sha256sum, _ := exec.LookPath("sha256sum")
			for b.Loop() {
				if sha256sum != "" {
					start := time.Now()
					if err := exec.Command(sha256sum, path).Run(); err != nil {
						b.Fatal(err)
					}
					sumTime += time.Since(start)
				}

				start := time.Now()
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				h := sha256.New()
				if _, err := io.Copy(h, f); err != nil {
					b.Fatal(err)
				}
				f.Close()
				shaTime += time.Since(start)

				stop := heapPeak()
				start = time.Now()
				w := bufio.NewWriterSize(io.Discard, 64<<10)
				if _, err := inspectPath(context.Background(), w, path, 0, bc.opts); err != nil {
					b.Fatal(err)
				}
				w.Flush()
				inspectTime += time.Since(start)
				peak = max(peak, stop())
			}
			mb := float64(size) / 1e6 * float64(b.N)
			b.ReportMetric(mb/inspectTime.Seconds(), "inspect-MB/s")
			b.ReportMetric(mb/shaTime.Seconds(), "sha256-MB/s")
			b.ReportMetric(shaTime.Seconds()/inspectTime.Seconds(), "ratio-vs-sha256")
			if sumTime > 0 {
				b.ReportMetric(mb/sumTime.Seconds(), "sha256sum-MB/s")
				b.ReportMetric(sumTime.Seconds()/inspectTime.Seconds(), "ratio-vs-sha256sum")
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(vmHWM())/(1<<20), "VmHWM-MB")
		})
	}
}
