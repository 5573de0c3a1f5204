package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
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
