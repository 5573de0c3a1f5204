package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/process"
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
			reports := make([]*fileReport, 0, len(args))
			for _, path := range args {
				rep, err := inspectFile(cmd, path, showPHI)
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
	cmd.Flags().BoolVar(&showPHI, "show-phi", false, "print whole documents, patient names and member ids included")
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

func inspectFile(cmd *cobra.Command, path string, showPHI bool) (*fileReport, error) {
	fh, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	h := sha256.New()
	size, err := io.Copy(h, fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	var docs []any
	f, err := process.File(cmd.Context(), fh, process.Config{NoAcks: true}, func(it process.Item) error {
		if it.Set == nil {
			return nil
		}
		var doc any
		switch {
		case showPHI && it.Set.Payment != nil:
			doc = it.Set.Payment
		case showPHI && it.Set.Claims != nil:
			doc = it.Set.Claims
		default:
			doc = it.Set.Summary()
		}
		docs = append(docs, doc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rep := newFileReport(path, hex.EncodeToString(h.Sum(nil)), size, f)
	i := 0
	for ix := range rep.Interchanges {
		for g := range rep.Interchanges[ix].Groups {
			sets := rep.Interchanges[ix].Groups[g].TransactionSets
			for k := range sets {
				if i < len(docs) && docs[i] != nil {
					sets[k].Document = docs[i]
				}
				i++
			}
		}
	}
	return rep, nil
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
