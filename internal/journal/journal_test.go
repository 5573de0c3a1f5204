package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecordAndRead: entries recorded are read back in order, from a
// time on; a last line cut short by a crash is skipped, a bad line
// before the last is an error naming it; the file is the owner's alone.
func TestRecordAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range []string{"/in/a.835", "/in/b.835", "/in/c.835"} {
		if err := w.Record(Entry{At: t0.Add(time.Duration(i) * time.Hour), Source: "acme", Path: p, Size: 10,
			SHA256: strings.Repeat("ab", 32), Action: "delete"}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"at":"2026-12-01T05:00:00Z","sou`) // a crash mid-line
	f.Close()
	r, _ := os.Open(path)
	got, err := Read(r, t0.Add(time.Hour))
	r.Close()
	if err != nil || len(got) != 2 || got[0].Path != "/in/b.835" || got[1].Path != "/in/c.835" {
		t.Fatalf("read: %+v %v", got, err)
	}
	bad := strings.NewReader("not json\n" + `{"at":"2026-12-01T05:00:00Z","path":"/x"}` + "\n")
	if _, err := Read(bad, t0); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a bad first line: %v", err)
	}
}
