package poller_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	pkgsftp "github.com/pkg/sftp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/sftp"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

type benchEnv struct {
	sshd testenv.SSHD
	st   *postgres.Store
	drop string
	src  *sftp.Source
}

func newBenchEnv(b *testing.B) *benchEnv {
	sshd := testenv.OpenSSH(b)
	st := pgtest.New(b, postgres.Options{})
	drop, err := os.MkdirTemp(sshd.Drop, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	os.Chmod(drop, 0o777)
	b.Cleanup(func() { os.RemoveAll(drop) })
	src, err := sftp.New(sftp.Config{Address: sshd.Addr, User: sshd.User, PrivateKeyFile: sshd.KeyFile, KnownHostsFile: sshd.KnownHosts})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	return &benchEnv{sshd: sshd, st: st, drop: drop, src: src}
}

func (e *benchEnv) poller(b *testing.B, mod func(*poller.Config)) *poller.Poller {
	cfg := poller.Config{Name: "bench", Directories: []string{e.drop}, PollInterval: time.Second,
		MaxFilesPerPoll: 100000, Downloads: 8, SpoolDir: b.TempDir()}
	if mod != nil {
		mod(&cfg)
	}
	return poller.New(cfg, e.src, e.st, inbox.Options{Routes: storetest.Routes}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
}

// sftpBatch runs OpenSSH's sftp client with a batch of commands, as an
// operator would, and returns its wall time (connect included).
func (e *benchEnv) sftpBatch(b *testing.B, commands string) time.Duration {
	host, port, _ := strings.Cut(e.sshd.Addr, ":")
	batch := filepath.Join(b.TempDir(), "batch")
	os.WriteFile(batch, []byte(commands), 0o600)
	start := time.Now()
	out, err := exec.Command("sftp", "-q", "-b", batch, "-i", e.sshd.KeyFile, "-P", port,
		"-o", "UserKnownHostsFile="+e.sshd.KnownHosts, "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
		e.sshd.User+"@"+host).CombinedOutput()
	if err != nil {
		b.Fatalf("sftp: %v: %s", err, out)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkSteadyStatePoll20k: a poll of a directory of 20,000 files that
// are all ingested already (one listing, one ledger query, nothing
// downloaded), beside two baselines on the same directory over the same
// sshd, interleaved: a bare pkg/sftp ReadDir on an open connection of its
// own (the limit; goal: ratio-vs-readdir, the median of poll/ReadDir over
// adjacent pairs, <= 1.1) and OpenSSH's sftp running `ls -l` (connect
// included; goal: ratio <= 1.5).
func BenchmarkSteadyStatePoll20k(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	for i := 0; i < 20000; i++ {
		os.WriteFile(filepath.Join(e.drop, fmt.Sprintf("era-%05d.835", i)), []byte("ISA*already ingested~"), 0o644)
	}
	entries, err := e.src.List(ctx, e.drop)
	if err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, len(entries))
	now := time.Now().UTC()
	for i, en := range entries {
		rows[i] = []any{"bench", en.Path, en.Size, en.MTime.UTC().Truncate(time.Microsecond), "ingested", now, now}
	}
	if _, err := e.st.Pool().CopyFrom(ctx, pgx.Identifier{"remote_file"},
		[]string{"source", "path", "size", "mtime", "status", "created_at", "updated_at"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	p := e.poller(b, nil)
	if st, err := p.PollOnce(ctx); err != nil || st.Skipped != 20000 || st.Downloaded != 0 {
		b.Fatalf("warm-up poll: %+v %v", st, err)
	}
	bare := e.bareSFTP(b)
	if infos, err := bare.ReadDir(e.drop); err != nil || len(infos) != 20000 {
		b.Fatalf("bare ReadDir: %d entries, %v", len(infos), err)
	}
	// Each poll is paired with a ReadDir right before or after it (in
	// turn), and the ratio is the median of the pairs' ratios: the two
	// cores are shared, and a pair sees the same load.
	var polls, reads, lists, records []time.Duration
	var pairs []float64
	for b.Loop() {
		for i := range 15 {
			var poll, read time.Duration
			timePoll := func() {
				start := time.Now()
				if _, err := p.PollOnce(ctx); err != nil {
					b.Fatal(err)
				}
				poll = time.Since(start)
			}
			timeRead := func() {
				start := time.Now()
				if _, err := bare.ReadDir(e.drop); err != nil {
					b.Fatal(err)
				}
				read = time.Since(start)
			}
			if i%2 == 0 {
				timePoll()
				timeRead()
			} else {
				timeRead()
				timePoll()
			}
			polls, reads = append(polls, poll), append(reads, read)
			pairs = append(pairs, poll.Seconds()/read.Seconds())
			// The poll status each poll records (one upsert), alone.
			start := time.Now()
			if err := e.st.RecordPoll(ctx, "bench", e.drop, "bench-holder", inbox.Fence{}, time.Now(), ""); err != nil {
				b.Fatal(err)
			}
			records = append(records, time.Since(start))
			lists = append(lists, e.sftpBatch(b, "ls -l "+e.drop+"\n"))
		}
	}
	pm, rm, lm := median(polls), median(reads), median(lists)
	slices.Sort(pairs)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(pm), "poll-ms")
	b.ReportMetric(ms(rm), "readdir-ms")
	b.ReportMetric(ms(lm), "sftp-ls-l-ms")
	b.ReportMetric(pairs[len(pairs)/2], "ratio-vs-readdir")
	b.ReportMetric(pm.Seconds()/lm.Seconds(), "ratio")
	b.ReportMetric(ms(median(records)), "record-poll-ms")
	b.ReportMetric(median(records).Seconds()/pm.Seconds(), "record-poll-share")
}

// bareSFTP opens a pkg/sftp client of its own to the benchmark's sshd, as
// the sftp source does, for baselines that list without ediwatch.
func (e *benchEnv) bareSFTP(b *testing.B) *pkgsftp.Client {
	pem, err := os.ReadFile(e.sshd.KeyFile)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		b.Fatal(err)
	}
	kh, err := knownhosts.New(e.sshd.KnownHosts)
	if err != nil {
		b.Fatal(err)
	}
	sc, err := ssh.Dial("tcp", e.sshd.Addr, &ssh.ClientConfig{User: e.sshd.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: kh})
	if err != nil {
		b.Fatal(err)
	}
	c, err := pkgsftp.NewClient(sc)
	if err != nil {
		sc.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(); sc.Close() })
	return c
}

// BenchmarkIngestNew2000: download, parse and commit to PostgreSQL 2,000
// new small 835 files, beside OpenSSH's sftp fetching the same files.
// Goal: ratio <= 3.
func BenchmarkIngestNew2000(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		f, _ := os.Create(filepath.Join(e.drop, fmt.Sprintf("era-%04d.835", i)))
		w := bufio.NewWriter(f)
		x12gen.Remit{Control: 10000 + i, Trace: fmt.Sprintf("N%d-", i), EOL: "\n"}.Write(w)
		w.Flush()
		f.Close()
	}
	local := b.TempDir()
	var ours, theirs time.Duration
	for b.Loop() {
		theirs = e.sftpBatch(b, "get "+e.drop+"/* "+local+"\n")
		p := e.poller(b, nil)
		p.PollOnce(ctx) // observe
		start := time.Now()
		st, err := p.PollOnce(ctx)
		ours = time.Since(start)
		if err != nil || st.Ingested != 2000 {
			b.Fatalf("ingest poll: %+v %v", st, err)
		}
	}
	b.ReportMetric(ours.Seconds(), "ediwatch-s")
	b.ReportMetric(theirs.Seconds(), "sftp-get-s")
	b.ReportMetric(ours.Seconds()/theirs.Seconds(), "ratio")
	b.ReportMetric(2000/ours.Seconds(), "files/s")
}

// BenchmarkPeakRSS200MB ingests one 200 MB 835 of many transaction sets
// over SFTP into PostgreSQL and reports this process's peak resident set
// (VmHWM). Run it alone in its process (bench/poll does). Goal: < 128 MB.
func BenchmarkPeakRSS200MB(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	f, _ := os.Create(filepath.Join(e.drop, "big.835"))
	w := bufio.NewWriterSize(f, 1<<20)
	x12gen.Remit{Interchanges: 1, SetsPerGroup: 200, ClaimsPerSet: 3100, LinesPerClaim: 2, EOL: "\n"}.Write(w)
	w.Flush()
	fi, _ := f.Stat()
	f.Close()
	before := vmHWM(b)
	for b.Loop() {
		p := e.poller(b, nil)
		p.PollOnce(ctx)
		st, err := p.PollOnce(ctx)
		if err != nil || st.Ingested != 1 {
			b.Fatalf("%+v %v", st, err)
		}
	}
	c, _ := e.st.Counts(ctx)
	if c.Inbox["processed"] != 200 {
		b.Fatalf("counts %+v", c)
	}
	b.ReportMetric(float64(fi.Size())/1e6, "file-MB")
	b.ReportMetric(float64(before)/1024, "rss-before-MB")
	b.ReportMetric(float64(vmHWM(b))/1024, "peak-rss-MB")
}

// vmHWM returns the process's peak resident set in KiB.
func vmHWM(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}
