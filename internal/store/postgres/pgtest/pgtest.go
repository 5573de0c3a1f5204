// Package pgtest opens the test PostgreSQL (from the README test command)
// for a test: a migrated store in a schema of its own, dropped when the
// test ends.
package pgtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

var seq atomic.Int64

// New returns a migrated store in a fresh schema; t's cleanup drops the
// schema and closes the store. Anything holding its connections must stop
// before the test ends.
func New(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	url := testenv.PostgresURL(t)
	opts.Schema = fmt.Sprintf("t_%d_%d", time.Now().UnixNano()%1e9, seq.Add(1))
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Pool().Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{opts.Schema}.Sanitize()+" CASCADE")
		s.Close()
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
