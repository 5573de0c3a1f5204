package poller

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLastInterchangeOpen: every complete fixture (whatever its
// delimiters, line endings, wrapping or padding) is closed; the same
// files cut anywhere before their final IEA is whole are open; what does
// not start as X12 is never open.
func TestLastInterchangeOpen(t *testing.T) {
	files, _ := filepath.Glob("../envelope/testdata/*.x12")
	if len(files) < 20 {
		t.Fatalf("%d fixtures", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		open := lastInterchangeOpen(bytes.NewReader(b), int64(len(b)))
		switch {
		case name == "err_truncated.x12" || name == "not_x12_bad_isa.x12" || name == "not_x12_empty.x12":
			// No closing IEA; too short to hold an ISA; empty: each looks
			// like an upload under way.
			if !open {
				t.Errorf("%s: has no closing IEA, reported closed", name)
			}
			continue
		case strings.HasPrefix(name, "not_x12") || strings.HasPrefix(name, "err_data_before_isa"):
			if open {
				t.Errorf("%s: not X12, reported open", name)
			}
			continue
		}
		if open {
			t.Errorf("%s: complete, reported open", name)
		}
		end := bytes.LastIndex(b, []byte("IEA"))
		for _, cut := range []int{len(b) / 2, end, end + 5, end + 10} {
			if cut <= 0 || cut >= len(b) || len(bytes.TrimRight(b[cut:], "~\r\n}")) == 0 {
				continue
			}
			if !lastInterchangeOpen(bytes.NewReader(b[:cut]), int64(cut)) {
				t.Errorf("%s cut at %d of %d: reported closed", name, cut, len(b))
			}
		}
	}
}
