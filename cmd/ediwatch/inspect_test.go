package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	code = exitCode(err, &errb)
	return out.String(), errb.String(), code
}

func fixture(name string) string {
	return filepath.Join("..", "..", "internal", "envelope", "testdata", name)
}

func TestInspectExitCodes(t *testing.T) {
	if _, _, code := runCLI(t, "inspect", fixture("835_canonical.x12"), fixture("835_crlf.x12")); code != 0 {
		t.Errorf("valid files: exit %d, want 0", code)
	}
	if _, _, code := runCLI(t, "inspect", fixture("835_canonical.x12"), fixture("err_se01_count.x12")); code != 1 {
		t.Errorf("a file with errors: exit %d, want 1", code)
	}
	if _, _, code := runCLI(t, "inspect", fixture("not_x12_text.txt")); code != 1 {
		t.Errorf("not X12: exit %d, want 1", code)
	}
	if _, stderr, code := runCLI(t, "inspect", fixture("no-such-file.x12")); code != 2 || !strings.Contains(stderr, "no-such-file") {
		t.Errorf("unreadable path: exit %d (%q), want 2", code, stderr)
	}
	if _, _, code := runCLI(t, "inspect"); code != 2 {
		t.Errorf("no arguments: exit %d, want 2", code)
	}
	if _, _, code := runCLI(t, "inspect", "--no-such-flag", fixture("835_canonical.x12")); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
	if _, _, code := runCLI(t, "inspect", filepath.Dir(fixture("x"))); code != 2 {
		t.Errorf("a directory: exit %d, want 2", code)
	}
}

func TestInspectJSON(t *testing.T) {
	stdout, _, code := runCLI(t, "inspect", "--json", fixture("multi_interchange.x12"), fixture("err_iea02_mismatch.x12"))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	var lines []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line is not JSON: %v: %s", err, sc.Text())
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per file", len(lines))
	}
	first := lines[0]
	for _, k := range []string{"file", "sha256", "x12", "valid", "errors", "keys", "interchanges"} {
		if _, ok := first[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	if keys := first["keys"].([]any); len(keys) != 4 {
		t.Errorf("keys %v", keys)
	}
	ix := first["interchanges"].([]any)[0].(map[string]any)
	if ix["sender"] != "ZZ:ACMEHP" || ix["control_number"] != "000000101" || ix["usage"] != "P" {
		t.Errorf("interchange %v", ix)
	}
	set := ix["groups"].([]any)[0].(map[string]any)["transaction_sets"].([]any)[0].(map[string]any)
	for _, k := range []string{"type", "control_number", "key", "content_hash", "segments", "valid", "errors"} {
		if _, ok := set[k]; !ok {
			t.Errorf("set lacks %q: %v", k, set)
		}
	}
	second := lines[1]
	errs := second["errors"].([]any)
	if second["valid"] != false || len(errs) != 1 {
		t.Fatalf("second file: %v", second)
	}
	e := errs[0].(map[string]any)
	if e["code"] != "iea02_mismatch" || e["ack"] != "001" || e["segment"].(float64) < 1 || e["offset"].(float64) < 1 {
		t.Errorf("error %v", e)
	}
}

// TestInspectShowsNoPatientData: the fixture's patient name and member id
// appear in neither output form.
func TestInspectShowsNoPatientData(t *testing.T) {
	for _, args := range [][]string{
		{"inspect", fixture("835_canonical.x12"), fixture("err_segment_id.x12")},
		{"inspect", "--json", fixture("835_canonical.x12"), fixture("err_segment_id.x12")},
	} {
		stdout, stderr, _ := runCLI(t, args...)
		for _, phi := range []string{"DOE", "JANE", "MEMBER001", "PCN001"} {
			if strings.Contains(stdout+stderr, phi) {
				t.Errorf("%v printed %q", args, phi)
			}
		}
	}
}

func TestExitCodeOfPlainError(t *testing.T) {
	var b bytes.Buffer
	if code := exitCode(errors.New("boom"), &b); code != 1 || !strings.Contains(b.String(), "boom") {
		t.Errorf("exit %d, %q", code, b.String())
	}
}

func TestAckCommand(t *testing.T) {
	stdout, stderr, code := runCLI(t, "ack", "--start", "77", "--us", "ZZ:OURCLINIC",
		fixture("835_canonical.x12"), fixture("err_iea02_mismatch.x12"), fixture("not_x12_text.txt"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, err := envelope.Parse(strings.NewReader(stdout), envelope.Options{})
	if err != nil || !f.Valid() {
		t.Fatalf("output is not valid X12: %v %v\n%s", err, f.AllErrors(), stdout)
	}
	if len(f.Interchanges) != 2 {
		t.Fatalf("%d interchanges: a 999 and a TA1 expected\n%s", len(f.Interchanges), stdout)
	}
	if f.Interchanges[0].SenderID != "OURCLINIC" || f.Interchanges[0].ControlNumber != "000000077" ||
		f.Interchanges[0].Groups[0].FunctionalID != "FA" || f.Interchanges[1].TA1[0].NoteCode != "001" {
		t.Errorf("acks: %+v %+v", f.Interchanges[0], f.Interchanges[1])
	}
	if !strings.Contains(stderr, "not X12") || !strings.Contains(stderr, "ack.999 ack999:x12:P:ZZ:ACMEHP") {
		t.Errorf("stderr %q", stderr)
	}
	// With both ids, an unreadable file gets a TA1 R 022.
	stdout, _, code = runCLI(t, "ack", "--us", "ZZ:OURCLINIC", "--them", "ZZ:ACMEHP", fixture("not_x12_text.txt"))
	if code != 0 || !strings.Contains(stdout, "TA1*000000000*") || !strings.Contains(stdout, "*R*022~") {
		t.Errorf("exit %d, %q", code, stdout)
	}
	if _, _, code := runCLI(t, "ack", "--us", "nocolon", fixture("835_canonical.x12")); code != 2 {
		t.Errorf("bad --us: exit %d", code)
	}
}

func TestInspectDocuments(t *testing.T) {
	stdout, _, _ := runCLI(t, "inspect", "--json", fixture("835_canonical.x12"))
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	doc := rep["interchanges"].([]any)[0].(map[string]any)["groups"].([]any)[0].(map[string]any)["transaction_sets"].([]any)[0].(map[string]any)["document"].(map[string]any)
	if doc["kind"] != "payment" || doc["trace_number"] != "EFT0001" || doc["payer_id"] != "1512345678" ||
		doc["amount"] != "150.00" || doc["balanced"] != true || doc["claims"].(float64) != 1 {
		t.Errorf("document %v", doc)
	}
	phi, _, _ := runCLI(t, "inspect", "--json", "--show-phi", fixture("835_canonical.x12"))
	if !strings.Contains(phi, "DOE") || !strings.Contains(phi, "MEMBER001") {
		t.Errorf("--show-phi did not show the patient")
	}
}

// TestInspectUnreadableFileAfterAPrintedOne: reports are streamed, yet a
// file that cannot be read still ends the run in exit status 2 with its
// name. A path that cannot be opened fails before anything is printed; a
// file whose reading fails midway (/proc/self/mem reads EIO at offset 0)
// fails after the reports before it were printed whole.
func TestInspectUnreadableFileAfterAPrintedOne(t *testing.T) {
	for _, form := range [][]string{{"inspect", "--json"}, {"inspect"}} {
		stdout, stderr, code := runCLI(t, append(form, fixture("835_canonical.x12"), fixture("no-such-file.x12"))...)
		if code != 2 || !strings.Contains(stderr, "no-such-file.x12") || stdout != "" {
			t.Errorf("%v, missing second file: exit %d, stderr %q, stdout %q", form, code, stderr, stdout)
		}
		stdout, stderr, code = runCLI(t, append(form, fixture("835_canonical.x12"), "/proc/self/mem")...)
		if code != 2 || !strings.Contains(stderr, "/proc/self/mem") {
			t.Errorf("%v, unreadable second file: exit %d, stderr %q", form, code, stderr)
		}
		if !strings.Contains(stdout, "835_canonical.x12") {
			t.Errorf("%v: the first file's report was not printed: %q", form, stdout)
		}
		if form[len(form)-1] == "--json" {
			first, rest, _ := strings.Cut(stdout, "\n")
			if rest != "" {
				t.Errorf("a line for the unreadable file: %q", rest)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(first), &m); err != nil || m["valid"] != true {
				t.Errorf("first line %q: %v", first, err)
			}
		}
	}
}

// TestInspectTextEscapesControlCharacters: envelope values are printed in
// the text table as the file holds them, but a partner's file must not
// drive the operator's terminal: ESC, BEL and other control characters in
// an ISA06 or a GS01 are shown as \xNN. Before, they were written raw
// (ESC [2J cleared the screen, ESC ] 0; set the window title).
func TestInspectTextEscapesControlCharacters(t *testing.T) {
	data, err := os.ReadFile(fixture("835_canonical.x12"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "*ZZ*ACMEHP         *", "*ZZ*\x1b[2J\x1b[31mEVIL  *", 1)
	s = strings.Replace(s, "GS*HP*", "GS*H\x1b]0;x\x07P*", 1)
	path := filepath.Join(t.TempDir(), "control.x12")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, _, _ := runCLI(t, "inspect", path)
	for i := 0; i < len(stdout); i++ {
		if c := stdout[i]; c < 0x20 && c != '\n' || c == 0x7F {
			t.Fatalf("control byte %#x at %d in the text report:\n%q", c, i, stdout)
		}
	}
	if !strings.Contains(stdout, `ZZ:\x1b[2J\x1b[31mEVIL`) || !strings.Contains(stdout, `H\x1b]0;x\x07P`) {
		t.Errorf("values not shown escaped:\n%s", stdout)
	}
}
