package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command. A command that
// has already printed what went wrong returns one with silent set.
type exitError struct {
	code   int
	err    error
	silent bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad usage: exit code 2.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// exitCode maps an error from run to the process exit code, printing it
// unless it was already reported.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.silent && ee.err != nil {
			fmt.Fprintln(stderr, "ediwatch:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "ediwatch:", err)
	return 1
}

// run executes the command line args. It is main without the process: tests
// call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	if err != nil && !errors.As(err, &ee) {
		// cobra's own errors (unknown flag or command) are usage errors.
		return &exitError{code: 2, err: err}
	}
	return err
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "ediwatch",
		Short:         "Process every X12 EDI document once and deliver its effects",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newInspectCmd(stdout, stderr), newAckCmd(stdout, stderr), newMigrateCmd(stdout),
		newIngestCmd(stdout, stderr), newDLQCmd(stdout), newSinkCmd(stdout), newRunCmd(stderr),
		newDemoCmd(stdout, stderr), newCheckConfigCmd(stdout),
		newReconcileCmd(stdout), newVersionCmd(stdout))
	return root
}
