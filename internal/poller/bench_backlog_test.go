package poller_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// backlogFiles is the size of the backlog BenchmarkBacklog drains.
const backlogFiles = 20000

// writeBacklog writes n one-payment 835 files, each of its own
// interchange and trace, into dir.
func writeBacklog(b *testing.B, dir string, n int) {
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("era-%05d.835", i)))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(f)
		x12gen.Remit{Control: 100000 + i, Trace: fmt.Sprintf("BL%d-", i), EOL: "\n"}.Write(w)
		w.Flush()
		f.Close()
	}
}

// BenchmarkBacklog drains a drop (a local directory, or the test sshd's
// over SFTP) of 20,000 new one-payment files into a fresh store, poll after poll as the daemon's loop runs them
// (max_files_per_poll 1000, 4 downloads), and reports files/s, the
// slowest poll, and then one idle poll of the drained directory (after:
// leave, so all 20,000 stay listed). Goals: >= 500 files/s on both
// stores; the slowest poll under 2 s, so a 1 s poll_interval holds.
func BenchmarkBacklog(b *testing.B) {
	for _, c := range []struct{ driver, source string }{
		{"sqlite", "local"}, {"postgres", "local"}, {"sqlite", "sftp"}, {"postgres", "sftp"},
	} {
		b.Run(c.driver+"/"+c.source, func(b *testing.B) {
			driver := c.driver
			var (
				dir string
				src poller.Source = local.Source{}
			)
			if c.source == "sftp" {
				e := newBenchEnv(b)
				dir, src = e.drop, e.src
			} else {
				dir = b.TempDir()
			}
			writeBacklog(b, dir, backlogFiles)
			var files, slowest, idle float64
			for b.Loop() {
				var st store.Store
				if driver == "sqlite" {
					st = drivertest.SQLite(b)
				} else {
					st = pgtest.New(b, postgres.Options{})
				}
				p := poller.New(poller.Config{Name: "bench", Directories: []string{dir}, PollInterval: time.Second,
					MaxFilesPerPoll: 1000, Downloads: 4, SpoolDir: b.TempDir()}, src, st,
					inbox.Options{Routes: storetest.Routes}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
				ctx := context.Background()
				p.PollOnce(ctx) // observe
				start := time.Now()
				ingested := 0
				var worst time.Duration
				for ingested < backlogFiles {
					t := time.Now()
					s, err := p.PollOnce(ctx)
					if err != nil {
						b.Fatal(err)
					}
					worst = max(worst, time.Since(t))
					if s.Ingested == 0 {
						b.Fatalf("a poll ingested nothing at %d of %d: %+v", ingested, backlogFiles, s)
					}
					ingested += s.Ingested
				}
				files = float64(backlogFiles) / time.Since(start).Seconds()
				slowest = worst.Seconds()
				t := time.Now()
				if s, err := p.PollOnce(ctx); err != nil || s.Ingested != 0 {
					b.Fatalf("idle poll: %+v %v", s, err)
				}
				idle = time.Since(t).Seconds()
			}
			b.ReportMetric(files, "files/s")
			b.ReportMetric(slowest, "slowest-poll-s")
			b.ReportMetric(idle, "idle-poll-s")
		})
	}
}
