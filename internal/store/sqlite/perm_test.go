package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestDatabaseFilesAreOwnerOnly: the database holds claims and
// remittances whole (their payloads), and so do its WAL and shared-memory
// files. A database the store creates is readable and writable by its
// owner alone, whatever the umask of the shell that ran `ediwatch ingest`
// or `run` outside the systemd unit (whose UMask=0077 covered it).
func TestDatabaseFilesAreOwnerOnly(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{"plain.db", "file:uri.db?_pragma=foreign_keys(1)"} {
		dir := t.TempDir()
		path := filepath.Join(dir, dsn)
		if rest, ok := strings.CutPrefix(dsn, "file:"); ok {
			path = "file:" + filepath.Join(dir, rest)
		}
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.Ingest(t, s, "era.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) < 2 {
			t.Errorf("%s: %d files in the directory, want the database and its WAL", dsn, len(entries))
		}
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: %s has mode %v, want no access beyond its owner", dsn, e.Name(), fi.Mode().Perm())
			}
		}
		s.Close()
	}
}
