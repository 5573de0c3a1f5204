// Package drivertest gives tests outside the store a fresh, migrated store
// on each real driver: SQLite in a temporary file, and PostgreSQL in a
// schema of its own (pgtest). Tests of the drivers themselves use
// storetest; this is for the packages built on the store.
package drivertest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
)

// SQLite returns a migrated SQLite store in t's temporary directory,
// closed when t ends.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	return SQLiteWith(t, sqlite.Options{})
}

// SQLiteWith is SQLite opened with opts.
func SQLiteWith(t testing.TB, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.OpenWith(context.Background(), filepath.Join(t.TempDir(), "ediwatch.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// Each runs fn as the subtests "sqlite" and "postgres", each with a fresh
// store of that driver.
func Each(t *testing.T, fn func(t *testing.T, s store.Store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, pgtest.New(t, postgres.Options{})) })
}
