// Command history builds stores holding a history shaped like ediwatch's
// (internal/store/history) at each size asked for, and times the reads
// the gauges, console, CLI and relay make of them, and one prune pass, as
// ratios against the first size: a read whose time grows with history
// shows a ratio far above 1.
//
//	go run ./bench/history -driver postgres -dsn postgres://... -files 10000,1000000 -days 333
//	go run ./bench/history -driver sqlite -files 10000,100000
//
// On PostgreSQL each size gets a schema of its own, dropped at the end;
// on SQLite a database file in a temporary directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/history"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
)

func main() {
	driver := flag.String("driver", "sqlite", "postgres or sqlite")
	dsn := flag.String("dsn", "", "the PostgreSQL server (postgres); ignored for sqlite")
	sizes := flag.String("files", "10000,100000", "history sizes in files, comma-separated; the first is the baseline")
	days := flag.Int("days", 0, "days the files span (default: 3,000 files a day)")
	runs := flag.Int("runs", 7, "timed runs of each read (the median is shown)")
	flag.BoolVar(&load, "load", true, "also time ingest, the relay and the console under 20 viewers (measureLoad)")
	flag.StringVar(&reuse, "reuse", "", "postgres, to diagnose: measure again the history kept (-keep) in this schema "+
		"(give its -files and -days; windows and prune cutoffs are then this run's, the prune op finds days already pruned)")
	flag.BoolVar(&keep, "keep", false, "keep each store built (PostgreSQL schema or SQLite file) and print where it is")
	flag.Parse()
	if err := run(context.Background(), *driver, *dsn, *sizes, *days, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "history:", err)
		os.Exit(1)
	}
}

// keep leaves the stores built for a look afterwards; load runs
// measureLoad on each.
var keep, load bool

// reuse names a kept PostgreSQL history to measure again.
var reuse string

type measured struct {
	files int
	days  int
	build time.Duration
	ops   map[string]time.Duration
	size  int64
	// rates are the load phase's rates a second, peakRSS this process's
	// peak RSS under its console viewers.
	rates   map[string]float64
	peakRSS int64
	// quarter is one reconciliation of the last 92 days (the console's
	// longest window) from the rollups of its closed days, quarterRSS
	// this process's peak RSS during it; quarterLive the same read from
	// every row of the window, foldDay the fold of one whole day.
	quarter, quarterLive, foldDay time.Duration
	quarterRSS, quarterLiveRSS    int64
	// tables holds each table's size in bytes: heap with TOAST, and
	// indexes.
	tables []tableSize
}

type tableSize struct {
	name          string
	heap, indexes int64
}

func run(ctx context.Context, driver, dsn, sizes string, days, runs int) error {
	var results []measured
	for _, f := range strings.Split(sizes, ",") {
		files, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || files <= 0 {
			return fmt.Errorf("-files: bad size %q", f)
		}
		d := days
		if d <= 0 {
			d = max(1, files/3000)
		}
		m, err := measure(ctx, driver, dsn, files, d, runs)
		if err != nil {
			return err
		}
		results = append(results, m)
	}
	// A Markdown table: bench/run appends it to bench/RESULTS.md.
	var b strings.Builder
	fmt.Fprintf(&b, "| %s, median of %d runs |", driver, runs)
	for i, r := range results {
		fmt.Fprintf(&b, " %d files (%d days), ms |", r.files, r.days)
		if i > 0 {
			fmt.Fprintf(&b, " ratio |")
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", 2*len(results)-1) + "\n")
	row := func(name string, cell func(r measured) string, ratio func(r measured) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for i, r := range results {
			fmt.Fprintf(&b, " %s |", cell(r))
			if i > 0 {
				fmt.Fprintf(&b, " %s |", ratio(r))
			}
		}
		b.WriteString("\n")
	}
	for _, op := range opNames {
		row(op, func(r measured) string { return fmt.Sprintf("%.2f", float64(r.ops[op].Microseconds())/1000) },
			func(r measured) string {
				return fmt.Sprintf("**%.2f×**", float64(r.ops[op])/float64(max(1, results[0].ops[op])))
			})
	}
	if load {
		for _, op := range loadOps {
			row(op, func(r measured) string { return fmt.Sprintf("%.2f", float64(r.ops[op].Microseconds())/1000) },
				func(r measured) string {
					return fmt.Sprintf("**%.2f×**", float64(r.ops[op])/float64(max(1, results[0].ops[op])))
				})
		}
		for _, rate := range loadRates {
			row(rate, func(r measured) string { return fmt.Sprintf("%.0f", r.rates[rate]) },
				func(r measured) string {
					return fmt.Sprintf("**%.2f×**", r.rates[rate]/max(1, results[0].rates[rate]))
				})
		}
		row(fmt.Sprintf("peak RSS, %d console clients, MB", clients),
			func(r measured) string { return fmt.Sprintf("%.0f", float64(r.peakRSS)/(1<<20)) },
			func(r measured) string {
				return fmt.Sprintf("%.2f×", float64(r.peakRSS)/float64(max(1, results[0].peakRSS)))
			})
	}
	row("fold one day into its rollup, ms", func(r measured) string { return fmt.Sprintf("%.0f", float64(r.foldDay)/1e6) },
		func(r measured) string {
			return fmt.Sprintf("**%.2f×**", float64(r.foldDay)/float64(max(1, results[0].foldDay)))
		})
	row("reconcile 92 days from every row (once), s", func(r measured) string { return fmt.Sprintf("%.2f", r.quarterLive.Seconds()) },
		func(r measured) string {
			return fmt.Sprintf("%.2f×", float64(r.quarterLive)/float64(max(1, results[0].quarterLive)))
		})
	row("peak RSS during it, MB", func(r measured) string { return fmt.Sprintf("%.0f", float64(r.quarterLiveRSS)/(1<<20)) },
		func(r measured) string {
			return fmt.Sprintf("%.2f×", float64(r.quarterLiveRSS)/float64(max(1, results[0].quarterLiveRSS)))
		})
	row("reconcile 92 days from day rollups (once), s", func(r measured) string { return fmt.Sprintf("%.2f", r.quarter.Seconds()) },
		func(r measured) string {
			return fmt.Sprintf("**%.2f×**", float64(r.quarter)/float64(max(1, results[0].quarter)))
		})
	row("peak RSS during it, MB", func(r measured) string { return fmt.Sprintf("%.0f", float64(r.quarterRSS)/(1<<20)) },
		func(r measured) string {
			return fmt.Sprintf("%.2f×", float64(r.quarterRSS)/float64(max(1, results[0].quarterRSS)))
		})
	row("build, files/s", func(r measured) string { return fmt.Sprintf("%.0f", float64(r.files)/r.build.Seconds()) },
		func(measured) string { return "" })
	row("database, MB", func(r measured) string { return fmt.Sprintf("%.0f", float64(r.size)/(1<<20)) },
		func(r measured) string {
			return fmt.Sprintf("%.1f×", float64(r.size)/float64(max(1, results[0].size)))
		})
	for _, r := range results {
		if len(r.tables) == 0 {
			continue // SQLite: one file
		}
		fmt.Fprintf(&b, "\n| %s, %d files (%d days) | heap and TOAST, MB | indexes, MB |\n|---|---|---|\n", driver, r.files, r.days)
		for _, t := range r.tables {
			fmt.Fprintf(&b, "| %s | %.1f | %.1f |\n", t.name, float64(t.heap)/(1<<20), float64(t.indexes)/(1<<20))
		}
	}
	_, err := os.Stdout.WriteString(b.String())
	return err
}

var opNames = []string{"Stats (gauges, overview, /sinks)", "reconcile 24h", "LastFileTimes", "Activity 24h",
	"AttemptStats 1h", "ListFiles", "ListFiles rejected", "ListDeadBrief", "CountDead", "FileDetail", "Claim",
	"Prune one day"}

func measure(ctx context.Context, driver, dsn string, files, days, runs int) (measured, error) {
	m := measured{files: files, days: days, ops: map[string]time.Duration{}, rates: map[string]float64{}}
	now := time.Now().UTC().Truncate(time.Second)
	var st, view store.Store
	var size func() (int64, error)
	var tables func() ([]tableSize, error)
	start := time.Now()
	switch driver {
	case "postgres":
		schema := fmt.Sprintf("history_%d_%d", files, os.Getpid())
		if reuse != "" {
			schema = reuse
		}
		s, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
		if err != nil {
			return m, err
		}
		defer func() {
			if keep || reuse != "" {
				fmt.Fprintf(os.Stderr, "kept schema %s\n", schema)
			} else {
				s.Pool().Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			}
			s.Close()
		}()
		if err := s.Migrate(ctx); err != nil {
			return m, err
		}
		start = time.Now()
		if reuse == "" {
			if err := history.Postgres(ctx, s.Pool(), files, days, now, progress(files)); err != nil {
				return m, err
			}
		}
		st = s
		// The console's own pool, as `run` opens it (store.console_conns
		// and console_timeout's defaults).
		v, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema, MaxConns: 4, StatementTimeout: 15 * time.Second})
		if err != nil {
			return m, err
		}
		defer v.Close()
		view = v
		tables = func() ([]tableSize, error) {
			rows, err := s.Pool().Query(ctx, `SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM pg_class c
				JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'
				ORDER BY pg_total_relation_size(c.oid) DESC`, schema)
			if err != nil {
				return nil, err
			}
			var ts []tableSize
			for rows.Next() {
				var t tableSize
				if err := rows.Scan(&t.name, &t.heap, &t.indexes); err != nil {
					return nil, err
				}
				ts = append(ts, t)
			}
			return ts, rows.Err()
		}
		size = func() (int64, error) {
			var n int64
			err := s.Pool().QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
				JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n)
			return n, err
		}
	case "sqlite":
		dir, err := os.MkdirTemp("", "ediwatch-history")
		if err != nil {
			return m, err
		}
		path := dir + "/history.db"
		defer func() {
			if keep {
				fmt.Fprintf(os.Stderr, "kept %s\n", path)
			} else {
				os.RemoveAll(dir)
			}
		}()
		s, err := sqlite.Open(ctx, path)
		if err != nil {
			return m, err
		}
		defer s.Close()
		if err := s.Migrate(ctx); err != nil {
			return m, err
		}
		start = time.Now()
		if err := history.SQLite(ctx, s.DB(), files, days, now, progress(files)); err != nil {
			return m, err
		}
		st = s
		v, err := sqlite.OpenWith(ctx, path, sqlite.Options{MaxConns: 4})
		if err != nil {
			return m, err
		}
		defer v.Close()
		view = v
		size = func() (int64, error) {
			var n int64
			for _, p := range []string{path, path + "-wal"} {
				if fi, err := os.Stat(p); err == nil {
					n += fi.Size()
				}
			}
			return n, nil
		}
	default:
		return m, fmt.Errorf("-driver: postgres or sqlite, not %q", driver)
	}
	m.build = time.Since(start)
	fmt.Fprintf(os.Stderr, "\r%d files built in %s\n", files, m.build.Round(time.Millisecond))
	var err error
	if m.size, err = size(); err != nil {
		return m, err
	}
	if tables != nil {
		if m.tables, err = tables(); err != nil {
			return m, err
		}
	}
	day := now.Add(-24 * time.Hour)
	oldest := now.Add(-time.Duration(days) * 24 * time.Hour)
	pruned := 0
	ops := map[string]func() error{
		opNames[0]: func() error { _, err := st.Stats(ctx, now); return err },
		opNames[1]: func() error { _, err := reconcile.Run(ctx, st, day, time.Hour, now); return err },
		opNames[2]: func() error { _, err := st.LastFileTimes(ctx); return err },
		opNames[3]: func() error { _, err := st.Activity(ctx, day); return err },
		opNames[4]: func() error { _, err := st.AttemptStats(ctx, now.Add(-time.Hour)); return err },
		opNames[5]: func() error { _, err := st.ListFiles(ctx, inbox.FileFilter{}, 501); return err },
		opNames[6]: func() error {
			_, err := st.ListFiles(ctx, inbox.FileFilter{Status: inbox.FileStatus("rejected")}, 501)
			return err
		},
		opNames[7]: func() error { _, err := st.ListDeadBrief(ctx, outbox.DeadFilter{}, 501); return err },
		opNames[8]: func() error { _, err := st.CountDead(ctx, outbox.DeadFilter{}); return err },
		opNames[9]: func() error { _, err := st.FileDetail(ctx, history.CorrelationID(files-100), 500); return err },
		// Leases up to 64 due rows; a lease expires long after the runs.
		opNames[10]: func() error { _, err := st.Claim(ctx, now, []string{"ledger", "acks"}, 64, time.Hour); return err },
		// Each run prunes the next day of the oldest history (keys past
		// retention), as the hourly pass meets it.
		opNames[11]: func() error {
			pruned++
			_, err := st.Prune(ctx, oldest.Add(time.Duration(pruned)*24*time.Hour/time.Duration(runs)), 1000)
			return err
		},
	}
	for _, name := range opNames {
		// The quarter and the load phase before the prune, which deletes
		// history.
		if name == opNames[11] {
			if err := measureQuarter(ctx, st, now, &m); err != nil {
				return m, err
			}
		}
		if name == opNames[11] && load {
			if err := measureLoad(ctx, st, view, files, days, runs, &m); err != nil {
				return m, err
			}
		}
		var times []time.Duration
		for range runs {
			t0 := time.Now()
			if err := ops[name](); err != nil {
				return m, fmt.Errorf("%s: %w", name, err)
			}
			times = append(times, time.Since(t0))
		}
		slices.Sort(times)
		m.ops[name] = times[len(times)/2]
	}
	if load && days > 2 {
		if err := measurePruneLoad(ctx, st, days, runs, &m); err != nil {
			return m, err
		}
	}
	return m, nil
}

func progress(total int) func(int) {
	return func(done int) { fmt.Fprintf(os.Stderr, "\rbuilding %d/%d files", done, total) }
}

// measureQuarter times the reconciliation of the console's longest
// window, 92 days, read from every row, then folds the window's closed
// days as maintenance does and times it again from their rollups.
func measureQuarter(ctx context.Context, st store.Store, now time.Time, m *measured) error {
	since := now.Add(-92 * 24 * time.Hour)
	resetPeakRSS()
	t0 := time.Now()
	if _, err := reconcile.Run(ctx, reconcile.FromRows(st), since, time.Hour, now); err != nil {
		return fmt.Errorf("reconcile 92 days: %w", err)
	}
	m.quarterLive, m.quarterLiveRSS = time.Since(t0), peakRSS()
	// A whole day of history at either size: the day before yesterday.
	t0 = time.Now()
	if err := reconcile.Fold(ctx, st, store.DayStart(now).Add(-2*24*time.Hour), now); err != nil {
		return err
	}
	m.foldDay = time.Since(t0)
	if n, err := reconcile.FoldClosed(ctx, st, now, 93*24*time.Hour, 100); err != nil || n == 0 {
		return fmt.Errorf("fold %d days: %w", n, err)
	}
	resetPeakRSS()
	t0 = time.Now()
	if _, err := reconcile.Run(ctx, st, since, time.Hour, now); err != nil {
		return fmt.Errorf("reconcile 92 days from rollups: %w", err)
	}
	m.quarter, m.quarterRSS = time.Since(t0), peakRSS()
	return nil
}
