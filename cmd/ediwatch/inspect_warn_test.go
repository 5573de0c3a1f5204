package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInspectWarningsExitZero: a file that is valid only through the
// reader's leniencies exits 0, prints one `warning CODE: segment N (offset
// O): message` line per warning, and carries the warnings at every level
// of --json.
func TestInspectWarningsExitZero(t *testing.T) {
	path := fixture("diag/warnings_each_level.x12")
	stdout, _, code := runCLI(t, "inspect", path)
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, stdout)
	}
	for _, line := range []string{
		"  warning utf8_bom: segment 1 (offset 0): the file starts with a UTF-8 byte order mark (EF BB BF), skipped\n",
		"  warning leading_whitespace: segment 1 (offset 3): 1 byte of whitespace before the ISA, skipped\n",
		"  warning isa_field_width: segment 1 (offset 4): ",
		"  warning iea02_leading_zeros: segment 7 (offset 198): IEA02=\"3438\" matches ISA13=\"000003438\" only when leading zeros are ignored\n",
		"  warning ge02_leading_zeros: segment 6 (offset 189): ",
		"  warning st_se_padding: segment 3 (offset 142): spaces around ST02 were trimmed\n",
		"  warning empty_segment: segment 5 (offset 173): 1 empty segment (two terminators \"~\" in a row) was skipped\n",
	} {
		if !strings.Contains(stdout, line) {
			t.Errorf("text output lacks %q:\n%s", line, stdout)
		}
	}
	stdout, _, code = runCLI(t, "inspect", "--json", path)
	if code != 0 {
		t.Fatalf("--json exit %d, want 0", code)
	}
	var rep struct {
		Valid        bool
		Warnings     []map[string]any
		Interchanges []struct {
			Warnings []map[string]any
			Groups   []struct {
				Warnings        []map[string]any
				TransactionSets []struct {
					Warnings []map[string]any
				} `json:"transaction_sets"`
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	ix := rep.Interchanges[0]
	if !rep.Valid || len(rep.Warnings) != 2 || len(ix.Warnings) != 5 || len(ix.Groups[0].Warnings) != 2 ||
		len(ix.Groups[0].TransactionSets[0].Warnings) != 2 {
		t.Errorf("warnings per level: %s", stdout)
	}
	w := ix.Warnings[0]
	for _, k := range []string{"code", "message", "offset", "segment"} {
		if _, ok := w[k]; !ok {
			t.Errorf("warning lacks %q: %v", k, w)
		}
	}
}

// TestInspectNamesWhatWasRead: the misplaced segments are named and
// counted, and a file without errors or warnings prints no warning line.
func TestInspectNamesWhatWasRead(t *testing.T) {
	stdout, _, code := runCLI(t, "inspect", fixture("diag/outside_set_counted.x12"))
	if code != 1 || !strings.Contains(stdout, "segment T outside any transaction set: 14 more segments after it; delimiters read from the ISA: ") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	stdout, _, _ = runCLI(t, "inspect", fixture("835_canonical.x12"))
	if strings.Contains(stdout, "warning") {
		t.Errorf("canonical file warns:\n%s", stdout)
	}
}
