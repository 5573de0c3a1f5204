package main

import (
	"bufio"
	"io"

	"github.com/spf13/cobra"
)

func newInspectCmd(stdout, stderr io.Writer) *cobra.Command {
	var asJSON, showPHI bool
	cmd := &cobra.Command{
		Use:   "inspect [--json] FILE...",
		Short: "Show the interchanges, keys and envelope errors of X12 files",
		Long: `inspect reads X12 files and shows, per file, its interchanges, functional
groups and transaction sets with their inbox keys, content hashes and envelope
errors. It never prints segment content.

Each 835 and 837 set also shows a summary of its document (trace number, payer,
amount, balance, number of claims). Patient names and member ids appear only
with --show-phi, which prints whole documents.

Exit status: 0 when every file is valid X12, 1 when any file has errors or is
not X12, 2 on bad usage or an unreadable file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Every path is checked first: an unreadable one fails before
			// any report is printed.
			for _, path := range args {
				fh, err := openRegular(path)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				fh.Close()
			}
			opts := inspectOptions{json: asJSON, showPHI: showPHI, workers: inspectWorkers()}
			w := bufio.NewWriterSize(stdout, 64<<10)
			valid := true
			for i, path := range args {
				ok, err := inspectPath(cmd.Context(), w, path, i, opts)
				if err != nil {
					w.Flush()
					return err
				}
				valid = valid && ok
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if !valid {
				return &exitError{code: 1, silent: true}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per file per line")
	cmd.Flags().BoolVar(&showPHI, "show-phi", false, "print whole documents, patient names and member ids included")
	return cmd
}

func validWord(ok bool) string {
	if ok {
		return "valid"
	}
	return "INVALID"
}

func ackLabel(level string) string {
	switch level {
	case "interchange":
		return "TA105"
	case "group":
		return "AK905"
	}
	return "IK502"
}
