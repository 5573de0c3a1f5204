package store

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ediwatch/ediwatch/"

// imports returns the module packages the non-test files of dir import.
func imports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok {
				out[rest] = true
			}
		}
	}
	return out
}

// TestImportsGoOneWay: the claim and delivery sides hold contracts the
// drivers implement, so neither imports store or a driver; the outbox does
// not know the inbox; the sink knows none of them.
func TestImportsGoOneWay(t *testing.T) {
	for pkg, forbidden := range map[string][]string{
		"internal/inbox":  {"internal/store"},
		"internal/outbox": {"internal/store", "internal/inbox"},
		"internal/sink":   {"internal/store", "internal/inbox", "internal/outbox"},
	} {
		for im := range imports(t, filepath.Join("..", "..", pkg)) {
			for _, f := range forbidden {
				if im == f || strings.HasPrefix(im, f+"/") {
					t.Errorf("%s imports %s", pkg, im)
				}
			}
		}
	}
}
