// Command ediwatch watches X12 EDI drops, processes every document once and
// delivers its side effects. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(realMain()) }

// realMain is main with its exit code: SIGINT and SIGTERM cancel the
// command's context, which stops it cleanly.
func realMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
}
