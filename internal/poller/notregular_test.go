package poller_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestEntriesThatAreNotFilesAreReported: a nested directory, a symlink
// (to /etc/passwd) and a named pipe in a drop are never opened; each is
// logged once by name while it stays, and counted at every listing under
// its kind; the regular file beside them is ingested. The directory files
// are moved to, and names the globs leave out, are not reported.
func TestEntriesThatAreNotFilesAreReported(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	os.Mkdir(filepath.Join(dir, "nested.835"), 0o755)
	os.Mkdir(filepath.Join(dir, "done"), 0o755)
	os.Mkdir(filepath.Join(dir, "notes"), 0o755)
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd.835")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.835"), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	m := metrics.New(prometheus.NewRegistry())
	p := poller.New(poller.Config{Name: "acme", Directories: []string{dir}, PollInterval: time.Second,
		Include: []string{"*.835", "done"}, After: "move:" + filepath.Join(dir, "done"), SpoolDir: t.TempDir()},
		local.Source{}, newSQLite(t), inbox.Options{Routes: storetest.Routes}, zap.New(core), m)
	var ingested int
	for range 3 {
		st, err := p.PollOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ingested += st.Ingested
	}
	if ingested != 1 {
		t.Errorf("ingested %d files, want a.835 alone", ingested)
	}
	told := map[string]string{}
	for _, e := range logs.FilterMessageSnippet("not a regular file").All() {
		name, kind := filepath.Base(e.ContextMap()["path"].(string)), e.ContextMap()["kind"].(string)
		if _, again := told[name]; again {
			t.Errorf("%s logged twice", name)
		}
		told[name] = kind
	}
	want := map[string]string{"nested.835": "directory", "passwd.835": "symlink", "pipe.835": "special"}
	if len(told) != len(want) {
		t.Errorf("logged %v, want %v", told, want)
	}
	for name, kind := range want {
		if told[name] != kind {
			t.Errorf("%s logged as %q, want %q", name, told[name], kind)
		}
		if got := testutil.ToFloat64(m.FilesSkipped.WithLabelValues("acme", kind)); got != 3 {
			t.Errorf("skipped %s = %v after three listings, want 3", kind, got)
		}
	}
}
