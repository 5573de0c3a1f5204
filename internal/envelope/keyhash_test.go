package envelope

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateKeyHashes = flag.Bool("update-keyhashes", false, "rewrite testdata/keyhashes.golden (only at a commit whose keys and hashes are the reference)")

// TestKeysAndHashesUnchangedByDiagnostics compares the keys and content
// hashes of every fixture and every corpus file with those the reader
// computed before warnings and the new checks existed (issue 19): a
// warning, a better error message or a new check never changes a key or a
// hash of a file that was readable before.
func TestKeysAndHashesUnchangedByDiagnostics(t *testing.T) {
	var out bytes.Buffer
	var paths []string
	for _, root := range []string{"testdata", corpusDir(t)} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && (d.Name() == "golden" || d.Name() == "fuzz" || d.Name() == "diag" || d.Name() == "keyhashes") {
					return filepath.SkipDir
				}
				if root == "testdata" && d.Name() == "corpus" {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".golden") {
				return nil
			}
			paths = append(paths, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	corpus := corpusDir(t)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(bytes.NewReader(data), Options{})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.ToSlash(p)
		if rel, err := filepath.Rel(corpus, p); err == nil && !strings.HasPrefix(rel, "..") {
			name = "corpus/" + filepath.ToSlash(rel)
		}
		out.WriteString("# " + name + " valid=" + strconv.FormatBool(f.Valid()) + "\n")
		for _, k := range f.Keys() {
			out.WriteString("key " + k + "\n")
		}
		for _, ix := range f.Interchanges {
			for _, g := range ix.Groups {
				for _, s := range g.Sets {
					out.WriteString("hash " + s.HashHex() + "\n")
				}
			}
		}
	}
	golden := filepath.Join("testdata", "keyhashes", "keys.golden")
	if *updateKeyHashes {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	got, before := splitKeyHashes(out.String()), splitKeyHashes(string(want))
	if len(got) != len(before) {
		t.Fatalf("%d files, want %d", len(got), len(before))
	}
	for name, b := range before {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: missing", name)
			continue
		}
		// Only the keys and hashes are compared: a file may change from
		// valid to invalid under the new checks, never its keys.
		if g.lines != b.lines {
			t.Errorf("%s (valid before: %v): keys or hashes changed:\n got %s\nwant %s", name, b.valid, g.lines, b.lines)
		}
	}
}

type keyHashes struct {
	valid bool
	lines string
}

func splitKeyHashes(s string) map[string]keyHashes {
	m := map[string]keyHashes{}
	var name string
	for _, line := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			n, v, _ := strings.Cut(rest, " valid=")
			name = n
			m[name] = keyHashes{valid: v == "true"}
			continue
		}
		if line != "" {
			kh := m[name]
			kh.lines += line + "; "
			m[name] = kh
		}
	}
	return m
}
