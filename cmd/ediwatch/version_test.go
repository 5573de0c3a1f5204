package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommandAndFlagAgree(t *testing.T) {
	var cmd, flag bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &cmd, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"--version"}, &flag, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if cmd.String() != flag.String() {
		t.Errorf("version prints %q, --version %q", cmd.String(), flag.String())
	}
	if !strings.HasPrefix(cmd.String(), "ediwatch ") || !strings.Contains(cmd.String(), runtime.Version()) {
		t.Errorf("version = %q, want the name and %s", cmd.String(), runtime.Version())
	}
}

// TestVersionNamesTheRevision builds the binary from this checkout, as a
// user would, and checks that it names the commit it was built from.
func TestVersionNamesTheRevision(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD (the tests run in a git checkout): %v", err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err == nil && !fi.IsDir() {
		// go build stamps VCS information only where .git is a directory;
		// a clone (as CI makes) always has one.
		t.Skip("a linked git worktree: go build records no VCS information here")
	}
	bin := filepath.Join(t.TempDir(), "ediwatch")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "revision " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
		t.Errorf("version = %q, want it to contain %q", out, want)
	}
}
