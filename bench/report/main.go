// Command report turns the output of ediwatch's benchmarks (go test
// -bench, on standard input) into bench/RESULTS.md: one table of figures
// beside their baselines, each goal and whether it is met. bench/run runs
// it.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// results maps "package/Benchmark" to metric to value.
type results map[string]map[string]float64

func parse(r io.Reader) results {
	res := results{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p[strings.LastIndex(p, "/")+1:]
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		name := strings.TrimSuffix(f[0], "-"+strconv.Itoa(runtime.NumCPU()))
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
		res[pkg+"/"+name] = m
	}
	return res
}

type row struct {
	what, figure, goal string
	met                string
}

func (r results) get(key, metric string) (float64, bool) {
	m, ok := r[key]
	if !ok {
		return 0, false
	}
	v, ok := m[metric]
	return v, ok
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func rows(r results) []row {
	var out []row
	if v, ok := r.get("envelope/BenchmarkParseVsSHA256", "ratio-vs-sha256"); ok {
		p, _ := r.get("envelope/BenchmarkParseVsSHA256", "parse-MB/s")
		s, _ := r.get("envelope/BenchmarkParseVsSHA256", "sha256-MB/s")
		a, _ := r.get("envelope/BenchmarkParseVsSHA256", "allocs/segment")
		out = append(out, row{"parse + keys + content hash of a 117 MB 835 vs crypto/sha256",
			fmt.Sprintf("%.0f vs %.0f MB/s = **%.2f**; %.4f allocs/segment", p, s, v, a), "≥ 0.5", verdict(v >= 0.5)})
	}
	a, okA := r.get("envelope/BenchmarkPeakHeap/16MB", "peak-heap-MB")
	b, okB := r.get("envelope/BenchmarkPeakHeap/256MB", "peak-heap-MB")
	if okA && okB {
		out = append(out, row{"reader peak heap, 16 MB vs 256 MB input", fmt.Sprintf("%.1f vs %.1f MB", a, b),
			"independent of size", verdict(b < 2*a+2)})
	}
	a, okA = r.get("process/BenchmarkFileManyInterchanges/10k", "live-heap-MB")
	b, okB = r.get("process/BenchmarkFileManyInterchanges/40k", "live-heap-MB")
	if okA && okB {
		perIX := (b - a) * (1 << 20) / 30000
		out = append(out, row{"process.File live heap at the last set, 10,000 vs 40,000 one-set interchanges",
			fmt.Sprintf("%.2f vs %.2f MB = **%.0f B** per interchange", a, b, perIX), "≤ 128 B per interchange",
			verdict(perIX <= 128)})
	}
	if v, ok := r.get("process/BenchmarkDocuments835", "ratio-vs-envelope"); ok {
		c, _ := r.get("process/BenchmarkDocuments835", "claims/s")
		d, _ := r.get("process/BenchmarkDocuments835", "doc-MB/s")
		al, _ := r.get("process/BenchmarkDocuments835", "allocs/claim")
		out = append(out, row{"835 documents (60 MB, 100,000 claims) vs envelope only",
			fmt.Sprintf("%.0f MB/s, %.0f claims/s, ratio %.3f, %.0f allocs/claim", d, c, v, al), "—", "—"})
	}
	for _, drv := range []string{"postgres", "sqlite"} {
		key := drv + "/BenchmarkIngestVsBareCommit"
		if _, ok := r[key]; !ok {
			continue
		}
		var parts []string
		met := true
		for _, w := range []string{"1w", "4w", "16w"} {
			in, _ := r.get(key, "ingests/s-"+w)
			bare, _ := r.get(key, "bare-commits/s-"+w)
			ratio, _ := r.get(key, "ratio-"+w)
			parts = append(parts, fmt.Sprintf("%s: %.0f vs %.0f = **%.2f**", w, in, bare, ratio))
			met = met && ratio >= 0.6
		}
		out = append(out, row{drv + ": ingests/s of a one-set 835 vs bare INSERT+COMMIT", strings.Join(parts, "; "), "≥ 0.6", verdict(met)})
	}
	if key := "sqlite/BenchmarkSynchronousFullVsNormal"; r[key] != nil {
		var parts []string
		for _, w := range []string{"1w", "4w"} {
			full, _ := r.get(key, "full-ingests/s-"+w)
			normal, _ := r.get(key, "normal-ingests/s-"+w)
			ratio, _ := r.get(key, "ratio-full-"+w)
			parts = append(parts, fmt.Sprintf("%s: %.0f vs %.0f = **%.2f**", w, full, normal, ratio))
		}
		full, _ := r.get(key, "full-5000-sets-s")
		normal, _ := r.get(key, "normal-5000-sets-s")
		ratio, _ := r.get(key, "ratio-full-5000-sets")
		parts = append(parts, fmt.Sprintf("one 5,000-set file: %.2f vs %.2f s = **%.2f** (time)", full, normal, ratio))
		out = append(out, row{"sqlite: synchronous=FULL (the default) vs NORMAL, ingests/s of a one-set 835",
			strings.Join(parts, "; "), "— (the cost of durability)", "—"})
	}
	for _, x := range []struct {
		drv      string
		maxFirst float64
	}{{"sqlite", 10}, {"postgres", 15}} {
		key := x.drv + "/BenchmarkIngest100MB"
		if r[key] == nil {
			continue
		}
		first, _ := r.get(key, "first-ingest-s")
		second, _ := r.get(key, "second-ingest-s")
		hash, _ := r.get(key, "sha256-s")
		rf, _ := r.get(key, "ratio-first")
		rs, _ := r.get(key, "ratio-second")
		figure := fmt.Sprintf("first %.2f s = **%.1f×**, again (all duplicates) %.2f s = **%.1f×**, sha256sum %.2f s",
			first, rf, second, rs, hash)
		if bare, ok := r.get(key, "bare-load-s"); ok {
			figure += fmt.Sprintf("; a bare load of the same rows %.2f s (first ingest %.1f× it)", bare, first/bare)
		}
		out = append(out, row{x.drv + ": ingest of a 100 MB 835 (60,580 sets of 8 claims) vs sha256sum",
			figure, fmt.Sprintf("≤ %.0f×, again ≤ 5×", x.maxFirst), verdict(rf <= x.maxFirst && rs <= 5)})
	}
	for _, drv := range []string{"sqlite", "postgres"} {
		key := drv + "/BenchmarkResendManyInterchanges"
		v, ok := r.get(key, "ratio-per-interchange")
		if !ok {
			continue
		}
		a, _ := r.get(key, "again-2k-ms")
		c, _ := r.get(key, "again-8k-ms")
		out = append(out, row{drv + ": a file of one-set interchanges sent again (every set a duplicate, a 999 per group), 2,000 vs 8,000",
			fmt.Sprintf("%.0f vs %.0f ms = **%.2f** per interchange", a, c, v), "≤ 2 (its square would give 4)",
			verdict(v <= 2)})
	}
	if v, ok := r.get("poller/BenchmarkSteadyStatePoll20k", "ratio"); ok {
		p, _ := r.get("poller/BenchmarkSteadyStatePoll20k", "poll-ms")
		l, _ := r.get("poller/BenchmarkSteadyStatePoll20k", "sftp-ls-l-ms")
		out = append(out, row{"steady-state poll of 20,000 ingested files vs OpenSSH sftp ls -l",
			fmt.Sprintf("%.0f vs %.0f ms = **%.2f**", p, l, v), "≤ 1.5", verdict(v <= 1.5)})
	}
	if v, ok := r.get("poller/BenchmarkSteadyStatePoll20k", "ratio-vs-readdir"); ok {
		p, _ := r.get("poller/BenchmarkSteadyStatePoll20k", "poll-ms")
		d, _ := r.get("poller/BenchmarkSteadyStatePoll20k", "readdir-ms")
		out = append(out, row{"steady-state poll of 20,000 ingested files vs a bare pkg/sftp ReadDir (the limit)",
			fmt.Sprintf("%.0f vs %.0f ms = **%.2f**", p, d, v), "≤ 1.1", verdict(v <= 1.1)})
	}
	if v, ok := r.get("poller/BenchmarkIngestNew2000", "ratio"); ok {
		e, _ := r.get("poller/BenchmarkIngestNew2000", "ediwatch-s")
		s, _ := r.get("poller/BenchmarkIngestNew2000", "sftp-get-s")
		out = append(out, row{"2,000 new 835s downloaded, parsed, committed to PostgreSQL vs sftp get",
			fmt.Sprintf("%.2f vs %.2f s = **%.2f**", e, s, v), "≤ 3", verdict(v <= 3)})
	}
	if v, ok := r.get("poller/BenchmarkPeakRSS200MB", "peak-rss-MB"); ok {
		size, _ := r.get("poller/BenchmarkPeakRSS200MB", "file-MB")
		out = append(out, row{fmt.Sprintf("peak RSS ingesting one %.0f MB 835 over SFTP into PostgreSQL", size),
			fmt.Sprintf("**%.1f MB**", v), "< 128 MB", verdict(v < 128)})
	}
	if v, ok := r.get("outbox/BenchmarkRelayVsPgbench", "ratio"); ok {
		d, _ := r.get("outbox/BenchmarkRelayVsPgbench", "deliveries/s")
		tps, _ := r.get("outbox/BenchmarkRelayVsPgbench", "pgbench-N-tps")
		out = append(out, row{"relay deliveries/s, 8 workers, vs pgbench -N, 8 clients",
			fmt.Sprintf("%.0f vs %.0f = **%.2f**", d, tps, v), "≥ 1.0", verdict(v >= 1)})
		p50, _ := r.get("outbox/BenchmarkRelayVsPgbench", "notify-p50-ms")
		p99, _ := r.get("outbox/BenchmarkRelayVsPgbench", "notify-p99-ms")
		out = append(out, row{"commit-to-POST latency with LISTEN/NOTIFY, idle relay",
			fmt.Sprintf("p50 %.1f ms, p99 **%.1f ms**", p50, p99), "p99 < 100 ms", verdict(p99 < 100)})
	}
	if p99, ok := r.get("outbox/BenchmarkCommitToPOSTUnderLoad", "p99-ms"); ok {
		key := "outbox/BenchmarkCommitToPOSTUnderLoad"
		p50, _ := r.get(key, "p50-ms")
		mx, _ := r.get(key, "max-ms")
		c, _ := r.get(key, "commits/s")
		d, _ := r.get(key, "deliveries/s")
		out = append(out, row{"commit-to-POST latency with LISTEN/NOTIFY while the relay sustains 1,000 deliveries/s (10 s)",
			fmt.Sprintf("%.0f commits/s, %.0f deliveries/s; p50 %.1f ms, p99 **%.1f ms**, max %.0f ms", c, d, p50, p99, mx),
			"p99 < 10 ms at ≥ 950/s", verdict(p99 < 10 && d >= 950)})
	}
	return append(out, bigFileRows(r)...)
}

// bigFileRows are the rows of bench/bigfile: the built binary beside
// sha256sum, the sqlite3 command-line tool and npm x12-parser.
func bigFileRows(r results) []row {
	var out []row
	get := func(name, metric string) (float64, bool) { return r.get("cmd/Benchmark"+name, metric) }
	size, ok := get("Files", "big-bytes")
	if !ok {
		return nil
	}
	sha, ok := get("SHA256sumBig", "s")
	if !ok || sha <= 0 {
		return nil
	}
	mb := size / 1e6
	what := fmt.Sprintf("a %.0f MB 835 (60,580 sets of 8 claims)", mb)
	if t, ok := get("InspectJSONBig", "s"); ok {
		rss, _ := get("InspectJSONBig", "peak-rss-MB")
		ratio := sha / t // throughput relative to sha256sum
		out = append(out, row{"`ediwatch inspect --json` of " + what + " vs `sha256sum`",
			fmt.Sprintf("%.2f vs %.2f s = **%.2f** of its throughput; peak RSS **%.0f MB**", t, sha, ratio, rss),
			"≥ 0.5; RSS < 64 MB", verdict(ratio >= 0.5 && rss < 64)})
	}
	bare, hasBare := get("SQLite3BareLoad", "s")
	// ingests adds the rows of ingest commands timed against base, the
	// sha256sum of their file.
	ingests := func(base float64, of string, cases []ingestCase) {
		for _, c := range cases {
			t, ok := get(c.name, "s")
			if !ok {
				continue
			}
			rss, _ := get(c.name, "peak-rss-MB")
			fig := fmt.Sprintf("%.2f vs %.2f s = **%.1f×**; peak RSS **%.0f MB**", t, base, t/base, rss)
			if hasBare && c.name == "IngestSQLiteFresh" {
				fig += fmt.Sprintf("; sqlite3 bare load of the same rows from SQL text %.2f s (%.1f×)", bare, t/bare)
			}
			out = append(out, row{c.what + " vs `sha256sum`" + of, fig, c.goal + " sha256sum; RSS < 96 MB",
				verdict(t/base <= c.limit && rss < 96)})
		}
	}
	ingests(sha, "", []ingestCase{
		{"IngestSQLiteFresh", "`ediwatch ingest` of it into a fresh SQLite store", "≤ 10×", 10},
		{"IngestSQLiteAgain", "the same again into SQLite (every set a duplicate)", "≤ 5×", 5},
		{"IngestPostgresFresh", "`ediwatch ingest` of it into a fresh PostgreSQL database", "≤ 15×", 15},
		{"IngestPostgresAgain", "the same again into PostgreSQL (every set a duplicate)", "≤ 5×", 5},
	})
	if shaSh, ok := get("SHA256sumShaped", "s"); ok && shaSh > 0 {
		ingests(shaSh, " of it", []ingestCase{
			{"IngestSQLiteShaped", "`ediwatch ingest` of a 2,500-interchange 835 (20 sets of 8 claims each, a 999 each) into a fresh SQLite store", "≤ 10×", 10},
			{"IngestSQLiteShapedAgain", "the same again into SQLite (every set a duplicate)", "≤ 5×", 5},
			{"IngestPostgresShaped", "`ediwatch ingest` of the 2,500-interchange 835 into a fresh PostgreSQL database", "≤ 15×", 15},
			{"IngestPostgresShapedAgain", "the same again into PostgreSQL (every set a duplicate)", "≤ 5×", 5},
		})
	}
	x, hasX := get("X12parser20MB", "s")
	e, hasE := get("InspectJSON20MB", "s")
	small, _ := get("Files", "small-bytes")
	what20 := fmt.Sprintf("a %.0f MB 835", small/1e6)
	if hasX && hasE {
		xr, _ := get("X12parser20MB", "peak-rss-MB")
		er, _ := get("InspectJSON20MB", "peak-rss-MB")
		out = append(out, row{"`ediwatch inspect --json` vs npm x12-parser 1.3.0 (every segment consumed) on " + what20,
			fmt.Sprintf("%.2f vs %.2f s = **%.1f×** faster; peak RSS %.0f vs %.0f MB", e, x, x/e, er, xr),
			"≥ 20× faster, RSS ≤ x12-parser's", verdict(x/e >= 20 && er <= xr)})
	} else {
		out = append(out, row{"`ediwatch inspect --json` vs npm x12-parser 1.3.0 on " + what20,
			"not measured: node or npm not present, or x12-parser not installable (bench/run says which)", "≥ 20× faster", "—"})
	}
	return out
}

func sh(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func main() {
	r := parse(os.Stdin)
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "# ediwatch benchmark results\n\nWritten by `bench/run` on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "Machine: %d cores (%s), %s memory, %s; PostgreSQL %s with fsync on; OpenSSH %s.\n\n",
		runtime.NumCPU(), cpu, sh("sh", "-c", "free -h | awk '/Mem:/{print $2}'"), runtime.Version(),
		sh("sh", "-c", "ls /usr/lib/postgresql | sort -n | tail -1"), sh("sh", "-c", "ssh -V 2>&1 | cut -d, -f1"))
	fmt.Fprintf(w, "Every figure is measured beside its baseline in the same run. Reproduce with `bench/run`.\n\n")
	fmt.Fprintf(w, "| benchmark | figure | goal | |\n| --- | --- | --- | --- |\n")
	for _, x := range rows(r) {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", x.what, x.figure, x.goal, x.met)
	}
	fmt.Fprintf(w, "\nWhere a goal is not met, README.md (Performance) says by how much and why.\n")
}

// ingestCase is one ingest command of bench/bigfile and its goal, a
// multiple of sha256sum's time.
type ingestCase struct {
	name, what, goal string
	limit            float64
}
