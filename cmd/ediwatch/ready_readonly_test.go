package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// pgSchema creates an empty schema on the server at url and returns the
// DSN that names it; the schema is dropped when t ends.
func pgSchema(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	schema := fmt.Sprintf("t_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		conn.Close(context.Background())
	})
	return url + "&search_path=" + schema
}

// migratedSchema is pgSchema, migrated.
func migratedSchema(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	dsn := pgSchema(t, url)
	c := config.Default().Store
	c.Driver, c.DSN = "postgres", dsn
	st, err := openStore(ctx, c, true)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return dsn
}

// TestReadyzRefusesAReadOnlyStore: a daemon whose DSN reaches only a
// standby, or a session with default_transaction_read_only, answers
// every read and can commit nothing: /readyz says so at once, not after
// its loops have stalled for a minute. The writable store is ready.
func TestReadyzRefusesAReadOnlyStore(t *testing.T) {
	primary, standby := testenv.PostgresHA(t)
	dsn := migratedSchema(t, primary)
	ctx := context.Background()
	ready := func(dsn string) (int, string) {
		t.Helper()
		c := config.Default().Store
		c.Driver, c.DSN, c.Migrate = "postgres", dsn, false
		st, err := openStore(ctx, c, false)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		return readyzStatus(t, &readiness{now: time.Now, ping: storePing(st)})
	}
	if code, body := ready(dsn); code != http.StatusOK {
		t.Fatalf("the primary: %d %q", code, body)
	}
	if code, body := ready(dsn + "&options=-c%20default_transaction_read_only%3Don"); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "read-only") {
		t.Errorf("a read-only session: %d %q, want 503 naming read-only", code, body)
	}

	// The standby has the schema once it has replayed its creation.
	standbyDSN := strings.Replace(dsn, primary, standby, 1)
	if standbyDSN == dsn {
		t.Fatalf("cannot name the schema on the standby: %s", standby)
	}
	conn, err := pgx.Connect(ctx, standbyDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(time.Minute); ; {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'inbox'").Scan(&n); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby never replayed the schema")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := ready(standbyDSN); code != http.StatusServiceUnavailable || !strings.Contains(body, "read-only") {
		t.Errorf("a DSN that reaches only a standby: %d %q, want 503 naming read-only", code, body)
	}
}

// TestReadyzRefusesAReadOnlySQLiteStore: a SQLite database opened
// read-only answers every read and can commit nothing: /readyz says so
// at once. A writable one is ready, also while another writer holds the
// write lock for longer than the check waits.
func TestReadyzRefusesAReadOnlySQLiteStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ediwatch.db")
	open := func(dsn string, migrate bool) store.Store {
		t.Helper()
		c := config.Default().Store
		c.Driver, c.DSN, c.Migrate = "sqlite", dsn, migrate
		st, err := openStore(ctx, c, migrate)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	ready := func(st store.Store) (int, string) {
		t.Helper()
		return readyzStatus(t, &readiness{now: time.Now, ping: storePing(st)})
	}
	rw := open(path, true)
	if code, body := ready(rw); code != http.StatusOK {
		t.Fatalf("the database: %d %q", code, body)
	}
	if code, body := ready(open("file:"+path+"?mode=ro", false)); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "read-only") {
		t.Errorf("opened read-only: %d %q, want 503 naming read-only", code, body)
	}
	other := open(path, false).(*sqlite.Store)
	tx, err := other.DB().BeginTx(ctx, nil) // _txlock=immediate: the write lock, held
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if code, body := ready(rw); code != http.StatusOK {
		t.Errorf("while another writer holds the lock: %d %q", code, body)
	}
}
