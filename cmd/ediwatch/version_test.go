package main

import (
	"bytes"
	"context"
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

// TestVersionNamesTheRevision builds the binary from a clone of this
// checkout, as a user would (go build records VCS information only where
// .git is a directory, which a linked worktree lacks), and checks that it
// names the commit it was built from.
func TestVersionNamesTheRevision(t *testing.T) {
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			t.Fatalf("git %s (the tests run in a git checkout): %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	head, top := git("rev-parse", "HEAD"), git("rev-parse", "--show-toplevel")
	src := filepath.Join(t.TempDir(), "ediwatch")
	git("clone", "--quiet", "--no-checkout", top, src)
	git("-C", src, "checkout", "--quiet", head)
	bin := filepath.Join(t.TempDir(), "ediwatch")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/ediwatch")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "revision " + head + " "; !strings.Contains(string(out), want) {
		t.Errorf("version = %q, want it to contain %q (a clean build)", out, want)
	}
}
