// Command cmdbench runs a command several times and prints its median wall
// time and peak resident set as a go test -bench line, so that
// bench/report reads it beside the Go benchmarks:
//
//	pkg: cmd
//	BenchmarkNAME  N  1.234 s  56.7 peak-rss-MB  1.100 min-s
//
// The peak RSS is the largest ru_maxrss of the command over the runs (the
// command itself, or the largest of the processes it waited for). A
// -before shell command runs untimed before each run (e.g. to lay a fresh
// store); the command's standard output is discarded unless -stdout names
// a file. -warmup runs the command that many times first, untimed (and
// its -before with it). A run that exits non-zero fails the benchmark.
//
// Usage: cmdbench -name NAME [-n 3] [-warmup 0] [-before 'sh'] [-stdin FILE] [-stdout FILE] -- CMD ARGS...
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cmdbench:", err)
		os.Exit(1)
	}
}

// result is one run's wall time and peak resident set.
type result struct {
	wall   time.Duration
	rssKiB int64
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cmdbench", flag.ContinueOnError)
	name := fs.String("name", "", "benchmark name (printed as BenchmarkNAME)")
	n := fs.Int("n", 3, "runs")
	warmup := fs.Int("warmup", 0, "untimed runs before the timed ones")
	before := fs.String("before", "", "shell command run untimed before each run")
	stdin := fs.String("stdin", "", "file given to the command as standard input")
	out := fs.String("stdout", "", "file that receives the command's standard output (default discarded)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if *name == "" || len(argv) == 0 || *n < 1 || *warmup < 0 {
		return fmt.Errorf("usage: cmdbench -name NAME [-n N] [-warmup N] [-before SH] [-stdin FILE] [-stdout FILE] -- CMD ARGS")
	}
	var results []result
	for i := 0; i < *warmup+*n; i++ {
		if *before != "" {
			c := exec.Command("sh", "-c", *before)
			c.Stdout, c.Stderr = stderr, stderr
			if err := c.Run(); err != nil {
				return fmt.Errorf("%s: before: %w", *name, err)
			}
		}
		r, err := once(argv, *stdin, *out, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", *name, err)
		}
		if i >= *warmup {
			results = append(results, r)
		}
	}
	walls := make([]time.Duration, len(results))
	var peak int64
	for i, r := range results {
		walls[i] = r.wall
		peak = max(peak, r.rssKiB)
	}
	slices.Sort(walls)
	fmt.Fprintf(stdout, "pkg: cmd\nBenchmark%s \t%d\t%.4f s\t%.1f peak-rss-MB\t%.4f min-s\n",
		*name, len(results), walls[len(walls)/2].Seconds(), float64(peak)/1024, walls[0].Seconds())
	return nil
}

// once runs argv and returns its wall time and ru_maxrss.
func once(argv []string, stdin, stdout string, stderr io.Writer) (result, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Stderr = stderr
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		c.Stdin = f
	}
	if stdout != "" {
		f, err := os.Create(stdout)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		c.Stdout = f
	}
	start := time.Now()
	if err := c.Run(); err != nil {
		return result{}, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	wall := time.Since(start)
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return result{}, fmt.Errorf("no rusage for %s", argv[0])
	}
	return result{wall: wall, rssKiB: ru.Maxrss}, nil
}
