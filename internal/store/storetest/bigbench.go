package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// BigRemit is the large remittance of the ingest benchmarks: one
// interchange of 60,580 835 sets of 8 claims each, about 100 MB.
var BigRemit = x12gen.Remit{SetsPerGroup: 60580, ClaimsPerSet: 8}

// BigFile returns r generated into memory.
func BigFile(b testing.TB, r x12gen.Remit) []byte {
	b.Helper()
	var buf bytes.Buffer
	if _, err := r.Write(&buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BareLoad loads, on the driver's own database, the very rows an ingest
// of the big file wrote (read back from s after the first ingest): the
// floor an ingest's writes are compared with. It returns how long the
// load itself took.
type BareLoad func(ctx context.Context) (time.Duration, error)

// BenchIngestBigFile ingests data (the sets of a large file) twice into
// the fresh store s: first every set is new, then every set is a
// duplicate. Beside them, in the same run, it times the sha256sum command
// over the same bytes in a file (the baseline of the goals: first ingest
// <= maxFirst x, second <= 5x; crypto/sha256 when sha256sum is missing,
// and crypto/sha256 is reported too) and, when bare is set, a bare load of
// the same rows, and reports seconds and the ratios.
func BenchIngestBigFile(b *testing.B, s store.Store, data []byte, bare BareLoad, maxFirst float64) {
	ctx := context.Background()
	sets := bytes.Count(data, []byte("~ST*"))
	file := filepath.Join(b.TempDir(), "big.835")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	sha256sum, _ := exec.LookPath("sha256sum")
	for b.Loop() {
		start := time.Now()
		sha256.Sum256(data)
		goHash := time.Since(start)
		hash, baseline := goHash, "crypto/sha256"
		if sha256sum != "" {
			// The best of three runs: the command reads the file from the
			// page cache, as ingest does after its first pass.
			hash, baseline = time.Hour, "sha256sum"
			for range 3 {
				start := time.Now()
				if err := exec.Command(sha256sum, file).Run(); err != nil {
					b.Fatal(err)
				}
				hash = min(hash, time.Since(start))
			}
		}
		var parsed time.Time // when the last write began (a large file: during its parse)
		ingest := func(path string, want inbox.Outcome) time.Duration {
			start := time.Now()
			r, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: Routes,
				BeforeWrite: func(context.Context) error { parsed = time.Now(); return nil }},
				inbox.FileInfo{Source: "bench", Path: path, Size: int64(len(data)), MTime: t0, SHA256: "x",
					CorrelationID: store.NewCorrelationID(), Now: time.Now()}, bytes.NewReader(data))
			d := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if n := r.Count(want); n != sets {
				b.Fatalf("%s: %d of %d sets %s", path, n, sets, want)
			}
			return d
		}
		start = time.Now()
		first := ingest("first.835", inbox.Processed)
		firstWrite := start.Add(first).Sub(parsed)
		start = time.Now()
		second := ingest("second.835", inbox.Duplicate)
		secondWrite := start.Add(second).Sub(parsed)
		b.ReportMetric(firstWrite.Seconds(), "first-write-s")
		b.ReportMetric(secondWrite.Seconds(), "second-write-s")
		b.ReportMetric(goHash.Seconds(), "crypto-sha256-s")
		b.ReportMetric(hash.Seconds(), "sha256-s")
		b.ReportMetric(first.Seconds(), "first-ingest-s")
		b.ReportMetric(second.Seconds(), "second-ingest-s")
		b.ReportMetric(first.Seconds()/hash.Seconds(), "ratio-first")
		b.ReportMetric(second.Seconds()/hash.Seconds(), "ratio-second")
		line := fmt.Sprintf("%d sets, %.0f MB: %s %.2fs (crypto/sha256 %.2fs); first ingest %.2fs = %.1fx (goal <= %.0fx); "+
			"second %.2fs = %.1fx (goal <= 5x)", sets, float64(len(data))/1e6, baseline, hash.Seconds(), goHash.Seconds(),
			first.Seconds(), first.Seconds()/hash.Seconds(), maxFirst, second.Seconds(), second.Seconds()/hash.Seconds())
		line += fmt.Sprintf("; of which from the write's start (during the parse) %.2fs and %.2fs", firstWrite.Seconds(), secondWrite.Seconds())
		if bare != nil {
			d, err := bare(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(d.Seconds(), "bare-load-s")
			b.ReportMetric(first.Seconds()/d.Seconds(), "ratio-first-to-bare")
			line += fmt.Sprintf("; bare load of the same rows %.2fs (first ingest %.1fx it)", d.Seconds(),
				first.Seconds()/d.Seconds())
		}
		b.Log(line)
	}
}
