package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
)

func newAckCmd(stdout, stderr io.Writer) *cobra.Command {
	var us, them string
	var start int64
	cmd := &cobra.Command{
		Use:   "ack [--us QUAL:ID] [--them QUAL:ID] [--start N] FILE...",
		Short: "Print the 999 and TA1 acknowledgments ediwatch would send for X12 files",
		Long: `ack processes X12 files as the daemon would and prints, on standard output,
the acknowledgment interchanges it would send back: a 999 per received
functional group and a TA1 when ISA14 asks for one or the interchange envelope
is rejected. Nothing is recorded and nothing is sent. A line per
acknowledgment goes to standard error.

Our interchange ids default to each file's receiver (and the partner's to its
sender); --us and --them override them. Control numbers start at --start.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := ack.Options{}
			var err error
			if opts.Us, err = parseParty(us); err != nil {
				return usageError("--us: %v", err)
			}
			if opts.Them, err = parseParty(them); err != nil {
				return usageError("--them: %v", err)
			}
			if start < 1 || start > 999999999 {
				return usageError("--start must be between 1 and 999999999 (got %d)", start)
			}
			cn := &ack.MemoryControlNumbers{Start: start}
			for _, path := range args {
				if err := ackFile(cmd, path, cn, opts, stdout, stderr); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&us, "us", "", "our interchange id as QUAL:ID (default: each file's receiver)")
	cmd.Flags().StringVar(&them, "them", "", "the partner's interchange id as QUAL:ID (default: each file's sender)")
	cmd.Flags().Int64Var(&start, "start", 1, "first control number (ISA13/GS06) to use")
	return cmd
}

func parseParty(s string) (ack.Party, error) {
	if s == "" {
		return ack.Party{}, nil
	}
	q, id, ok := strings.Cut(s, ":")
	if !ok || q == "" || id == "" || len(q) > 2 || len(id) > 15 {
		return ack.Party{}, fmt.Errorf("want QUAL:ID with a 2-character qualifier and an id of up to 15 characters (got %q)", s)
	}
	return ack.Party{Qualifier: q, ID: id}, nil
}

func ackFile(cmd *cobra.Command, path string, cn ack.ControlNumbers, opts ack.Options, stdout, stderr io.Writer) error {
	fh, err := openRegular(path)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer fh.Close()
	// Transient: only the acknowledgments are kept, not the sets.
	cfg := process.Config{ControlNumbers: cn, Ack: opts, Transient: true}
	f, err := process.File(cmd.Context(), fh, cfg, func(it process.Item) error {
		if it.Ack == nil {
			return nil
		}
		var ev process.AckEvent
		if err := json.Unmarshal(it.Ack.Payload, &ev); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s: %s %s\n", path, it.Ack.Kind, it.Ack.Key)
		_, err := io.WriteString(stdout, ev.X12)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !f.X12 {
		x, err := ack.BuildTA1Unreadable(cmd.Context(), opts.Us, opts.Them, cn, opts)
		if err != nil {
			fmt.Fprintf(stderr, "%s: not X12 (%s); no TA1: %v\n", path, f.Errors[0].Cause.Code, err)
			return nil
		}
		fmt.Fprintf(stderr, "%s: ack.ta1 %s (not X12)\n", path, "ta1:"+f.Key)
		_, err = stdout.Write(x)
		return err
	}
	return nil
}

// openRegular opens a regular file for reading.
func openRegular(path string) (*os.File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return fh, nil
}
