package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/envelope"
)

func newInspectCmd(stdout, stderr io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect [--json] FILE...",
		Short: "Show the interchanges, keys and envelope errors of X12 files",
		Long: `inspect reads X12 files and shows, per file, its interchanges, functional
groups and transaction sets with their inbox keys, content hashes and envelope
errors. It never prints segment content.

Exit status: 0 when every file is valid X12, 1 when any file has errors or is
not X12, 2 on bad usage or an unreadable file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			reports := make([]*fileReport, 0, len(args))
			for _, path := range args {
				rep, err := inspectFile(path)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				reports = append(reports, rep)
			}
			var err error
			if asJSON {
				err = writeJSONReports(stdout, reports)
			} else {
				err = writeTextReports(stdout, reports)
			}
			if err != nil {
				return err
			}
			for _, r := range reports {
				if !r.Valid {
					return &exitError{code: 1, silent: true}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per file per line")
	return cmd
}

// fileReport is one line of `inspect --json`: the file, then its envelope
// report.
type fileReport struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	*envelope.Report
}

func inspectFile(path string) (*fileReport, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(fh, h)}
	f, err := envelope.Parse(cr, envelope.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Parse reads to the end; drain in case it stopped early.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return newFileReport(path, hex.EncodeToString(h.Sum(nil)), cr.n, f), nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func newFileReport(path, sum string, size int64, f *envelope.File) *fileReport {
	return &fileReport{File: path, SHA256: sum, Size: size, Report: f.Report()}
}

func writeJSONReports(w io.Writer, reports []*fileReport) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range reports {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// writeTextReports prints a compact table per file: the envelope tree with
// keys, then the errors. Never segment content.
func writeTextReports(w io.Writer, reports []*fileReport) error {
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		status := "valid"
		switch {
		case !r.X12:
			status = "NOT X12"
		case !r.Valid:
			status = "INVALID"
		}
		fmt.Fprintf(w, "%s  %s  %d bytes  sha256:%s\n", r.File, status, r.Size, r.SHA256)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if !r.X12 {
			fmt.Fprintf(tw, "  key\t%s\n", r.Keys[0])
		}
		for _, ix := range r.Interchanges {
			fmt.Fprintf(tw, "  ISA %s\t%s -> %s\t%s %s\t%s\t%s\n", ix.ControlNumber, ix.Sender, ix.Receiver,
				ix.Version, ix.Usage, validWord(ix.Valid), "")
			for _, g := range ix.Groups {
				fmt.Fprintf(tw, "    GS %s\t%s\t%s\t%s\t\n", g.ControlNumber, g.FunctionalID, g.Version, validWord(g.Valid))
				for _, s := range g.TransactionSets {
					fmt.Fprintf(tw, "      ST %s %s\t%d segments\t\t%s\t%s\n", s.Type, s.ControlNumber,
						s.Segments, validWord(s.Valid), s.Key)
				}
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, e := range r.Errors {
			ack := ""
			if e.Ack != "" {
				ack = " [" + ackLabel(e.Level) + " " + e.Ack + "]"
			}
			fmt.Fprintf(w, "  error %s: %s%s\n", e.Code, e.Message, ack)
		}
	}
	return nil
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
