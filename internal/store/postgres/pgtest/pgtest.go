// Package pgtest opens the test PostgreSQL (from the README test command)
// for a test: a migrated store in a schema of its own, dropped when the
// test ends.
package pgtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
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
	return NewAt(t, testenv.PostgresURL(t), opts)
}

// NewAt is New on the server at url.
func NewAt(t testing.TB, url string, opts postgres.Options) *postgres.Store {
	t.Helper()
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

// StallReplication stops the WAL sender of every standby streaming from
// the primary s is on (SIGSTOP: the standby stays "streaming", as under
// ordinary replication lag, but flushes nothing more) and returns the
// function that lets it go on. The test's cleanup lets it go on too.
func StallReplication(t testing.TB, s *postgres.Store) func() {
	t.Helper()
	return StallWALSenders(t, s.Pool())
}

// StallWALSenders is StallReplication on the primary q queries.
func StallWALSenders(t testing.TB, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) func() {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT pid FROM pg_stat_replication WHERE state = 'streaming'`)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	rows.Close()
	if len(pids) == 0 {
		t.Fatal("no standby streams from the test primary")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("stop the WAL sender %d (the tests run as root, or as the postgres user): %v", pid, err)
		}
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGCONT)
			}
		}
	}
	t.Cleanup(resume)
	return resume
}
