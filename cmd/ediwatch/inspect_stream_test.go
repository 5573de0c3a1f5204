package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// The reference: `inspect` as it was before it streamed, building the
// whole report of a file in memory with envelope.Parse and File.Report
// (documents from process.File, which keeps no sets in the File it
// returns), then
// encoding it with encoding/json and aligning the text with text/tabwriter.

type refFileReport struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	*envelope.Report
}

func refInspectFile(ctx context.Context, path string, showPHI bool) (*refFileReport, error) {
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
	f, err := envelope.Parse(fh, envelope.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	var docs []any
	_, err = process.File(ctx, fh, process.Config{NoAcks: true}, func(it process.Item) error {
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
	rep := &refFileReport{File: path, SHA256: hex.EncodeToString(h.Sum(nil)), Size: size, Report: f.Report()}
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

func refWriteJSON(w io.Writer, reports []*refFileReport) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range reports {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func refWriteText(w io.Writer, reports []*refFileReport) error {
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
			// Envelope values are shown with their control characters
			// escaped (textSafe), never sent to the terminal.
			fmt.Fprintf(tw, "  ISA %s\t%s -> %s\t%s %s\t%s\t%s\n", textSafe(ix.ControlNumber), textSafe(ix.Sender),
				textSafe(ix.Receiver), textSafe(ix.Version), textSafe(ix.Usage), validWord(ix.Valid), "")
			for _, g := range ix.Groups {
				fmt.Fprintf(tw, "    GS %s\t%s\t%s\t%s\t\n", textSafe(g.ControlNumber), textSafe(g.FunctionalID),
					textSafe(g.Version), validWord(g.Valid))
				for _, s := range g.TransactionSets {
					fmt.Fprintf(tw, "      ST %s %s\t%d segments\t\t%s\t%s\n", textSafe(s.Type), textSafe(s.ControlNumber),
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
		// Warnings: the file's, then each set's, group's and
		// interchange's as it ends.
		warn := func(ws []envelope.Warning) {
			for _, x := range ws {
				if x.Segment > 0 {
					fmt.Fprintf(w, "  warning %s: segment %d (offset %d): %s\n", x.Code, x.Segment, x.Offset, x.Message)
				} else {
					fmt.Fprintf(w, "  warning %s: offset %d: %s\n", x.Code, x.Offset, x.Message)
				}
			}
		}
		warn(r.Warnings)
		for _, ix := range r.Interchanges {
			for _, g := range ix.Groups {
				for _, s := range g.TransactionSets {
					warn(s.Warnings)
				}
				warn(g.Warnings)
			}
			warn(ix.Warnings)
		}
	}
	return nil
}

// reference returns the JSON lines and the text the reference prints for
// paths.
func reference(t *testing.T, paths []string, showPHI bool) (jsonOut, text string) {
	t.Helper()
	var reps []*refFileReport
	for _, p := range paths {
		r, err := refInspectFile(context.Background(), p, showPHI)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	var j, x bytes.Buffer
	if err := refWriteJSON(&j, reps); err != nil {
		t.Fatal(err)
	}
	if err := refWriteText(&x, reps); err != nil {
		t.Fatal(err)
	}
	return j.String(), x.String()
}

// streamed returns what the streaming inspect prints for paths.
func streamed(t *testing.T, paths []string, opts inspectOptions) string {
	t.Helper()
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	for i, p := range paths {
		if _, err := inspectPath(context.Background(), w, p, i, opts); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// sameJSONLines reports how the JSON lines got differ from want, compared
// as decoded values (member order is free), or "".
func sameJSONLines(got, want string) string {
	g := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	w := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	if len(g) != len(w) {
		return fmt.Sprintf("%d lines, want %d", len(g), len(w))
	}
	for i := range g {
		var a, b any
		if err := json.Unmarshal([]byte(g[i]), &a); err != nil {
			return fmt.Sprintf("line %d is not JSON: %v: %.300s", i+1, err, g[i])
		}
		if err := json.Unmarshal([]byte(w[i]), &b); err != nil {
			return fmt.Sprintf("reference line %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(a, b) {
			return fmt.Sprintf("line %d differs:\n got %.2000s\nwant %.2000s", i+1, g[i], w[i])
		}
	}
	return ""
}

// checkStreamedMatchesReference compares the streamed reports of paths,
// inline and with a pool, spilling in memory and to disk, with the
// reference's: the same JSON values, the same text bytes.
func checkStreamedMatchesReference(t *testing.T, paths []string) {
	t.Helper()
	for _, phi := range []bool{false, true} {
		wantJSON, wantText := reference(t, paths, phi)
		for _, workers := range []int{0, 2} {
			for _, limit := range []int{0, 16} {
				o := inspectOptions{json: true, showPHI: phi, workers: workers, spillLimit: limit}
				if d := sameJSONLines(streamed(t, paths, o), wantJSON); d != "" {
					t.Errorf("--json %+v: %s", o, d)
				}
				if phi {
					continue
				}
				o.json = false
				if got := streamed(t, paths, o); got != wantText {
					t.Errorf("text %+v:\n got %q\nwant %q", o, got, wantText)
				}
			}
		}
	}
}

// TestInspectStreamMatchesFullReport: on every corpus and fixture file,
// the streamed report is the one the whole report in memory gave.
func TestInspectStreamMatchesFullReport(t *testing.T) {
	dir := testenv.Corpus(t)
	files, err := filepath.Glob(filepath.Join(dir, "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	fixtures, _ := filepath.Glob(fixture("*.*"))
	files = append(files, fixtures...)
	diag, _ := filepath.Glob(fixture("diag/*.x12"))
	files = append(files, diag...)
	if len(files) < 80 {
		t.Fatalf("only %d files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			checkStreamedMatchesReference(t, []string{f})
		})
	}
	// Several files in one run: the text form separates them.
	checkStreamedMatchesReference(t, files[:12])
}

// TestInspectStreamMatchesFullReportOnBrokenFiles: generated files of
// several interchanges, with errors at every level, with an 837, and with
// envelope values that tabwriter would interpret or that are not ASCII.
func TestInspectStreamMatchesFullReportOnBrokenFiles(t *testing.T) {
	var remit bytes.Buffer
	if _, err := (x12gen.Remit{Interchanges: 4, SetsPerGroup: 5, ClaimsPerSet: 3, EOL: "\n"}).Write(&remit); err != nil {
		t.Fatal(err)
	}
	var claims bytes.Buffer
	if err := (x12gen.Claims{Claims: 4, EOL: "\n"}).Write(&claims); err != nil {
		t.Fatal(err)
	}
	base := remit.String()
	nth := func(s, old, new string, n int) string { // replace the n-th occurrence (1-based)
		i := -1
		for ; n > 0; n-- {
			j := strings.Index(s[i+1:], old)
			if j < 0 {
				t.Fatalf("no %q", old)
			}
			i += j + 1
		}
		return s[:i] + new + s[i+len(old):]
	}
	cases := map[string]string{
		"valid":        base,
		"837":          claims.String(),
		"both":         base + claims.String(),
		"se01":         nth(base, "SE*", "SE*9", 3),
		"se02":         nth(base, "SE*", "SE*1*0009~SE*", 7),
		"missing_se":   nth(base, "\nSE*", "\nXX*", 2),
		"missing_ge":   nth(base, "\nGE*", "\nXX*", 2),
		"missing_iea":  nth(base, "\nIEA*", "\nXX*", 3),
		"iea02":        nth(base, "IEA*1*", "IEA*1*9", 1),
		"ge01":         nth(base, "GE*5*", "GE*6*", 4),
		"st02_dup":     nth(base, "ST*835*0002", "ST*835*0001", 2),
		"segment_id":   nth(nth(base, "\nLX*", "\nlx*", 2), "\nLX*", "\nL#*", 5),
		"outside":      nth(nth(base, "\nGS*", "\nN1*PR*X~\nGS*", 2), "\nISA*", "\nJUNK*1~\nISA*", 2),
		"before_isa":   "leading text\n" + base + "trailing*junk~\n",
		"truncated":    base[:len(base)-400],
		"cut_in_set":   base[:len(base)/2],
		"tab_in_gs01":  strings.ReplaceAll(base, "GS*HP*", "GS*H\tP*"),
		"vtab_in_ctl":  nth(base, "GS*HP*ACMEHP*RIVERSIDE*20261130*0930*2*", "GS*HP*ACMEHP*RIVERSIDE*20261130*0930*2\v*", 1),
		"non_ascii":    strings.ReplaceAll(base, "GS*HP*", "GS*HÉ\xff\u2028*"),
		"quotes":       strings.ReplaceAll(base, "GS*HP*", "GS*H\"\\<&>*"),
		"empty_group":  nth(base, "GS*", "GS*HP*A*B*20261130*0930*77*X*005010X221A1~GE*0*77~\nGS*", 2),
		"isa_alone":    base + "ISA*00*          *00*          *ZZ*ACMEHP         *ZZ*RIVERSIDE      *261130*0930*^*00501*000000099*0*P*:~\nTA1*000000001*261130*0930*A*000~\nIEA*0*000000099~\n",
		"many_errors":  strings.ReplaceAll(base, "\nDTM*", "\nD$M*"),
		"crlf":         strings.ReplaceAll(base, "\n", "\r\n"),
		"not_x12":      "hello\n",
		"bad_isa_late": base + "ISA*00*short~\n",
		// a file error and an interchange error at one offset
		"bad_isa_inside": nth(base, "\nIEA*", "\nISA*00*short~\nIEA*", 1),
	}
	dir := t.TempDir()
	var all []string
	for name, content := range cases {
		p := filepath.Join(dir, name+".x12")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
		t.Run(name, func(t *testing.T) { checkStreamedMatchesReference(t, []string{p}) })
	}
	checkStreamedMatchesReference(t, all)
}

// maxWriteRecorder records the largest single write it is given.
type maxWriteRecorder struct{ max, total int }

func (m *maxWriteRecorder) Write(p []byte) (int, error) {
	m.max, m.total = max(m.max, len(p)), m.total+len(p)
	return len(p), nil
}

// TestInspectJSONStreamsInterchangesWithoutSets: the JSON report is written
// as the file is read even when its interchanges (or groups) hold no
// transaction sets. Before, a batch was flushed only after a set, so a file
// of 200,000 set-less interchanges (21 MB) held its whole report (180 MB)
// in memory and wrote it in one piece at the end.
func TestInspectJSONStreamsInterchangesWithoutSets(t *testing.T) {
	const isa = "ISA*00*          *00*          *ZZ*ACMEHP         *ZZ*RIVERSIDE      *261130*0930*^*00501*%09d*0*P*:~"
	var b strings.Builder
	for i := 1; i <= 10000; i++ {
		fmt.Fprintf(&b, isa+"GS*HP*ACMEHP*RIVERSIDE*20261130*0930*1*X*005010X221A1~GE*0*1~IEA*1*%09d~\n", i, i)
	}
	path := filepath.Join(t.TempDir(), "setless.x12")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{0, 2} {
		rec := &maxWriteRecorder{}
		w := bufio.NewWriter(rec)
		if _, err := inspectPath(context.Background(), w, path, 0, inspectOptions{json: true, workers: workers}); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if rec.total < 2<<20 || rec.max > 512<<10 {
			t.Errorf("workers %d: %d bytes written, the largest write %d bytes: the report was not streamed", workers, rec.total, rec.max)
		}
	}
}
