package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadNeverShowsThePath: a secret pasted where its file's path
// belongs is refused without being shown; a readable file is returned as
// it is.
func TestReadNeverShowsThePath(t *testing.T) {
	_, err := Read("whsec_hunter2hunter2")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	dir := t.TempDir()
	_, err = Read(dir) // a directory: read fails after open
	if err == nil || strings.Contains(err.Error(), dir) {
		t.Errorf("directory: %v", err)
	}
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(p); err != nil || string(b) != "s3cret\n" {
		t.Errorf("%q %v", b, err)
	}
}
