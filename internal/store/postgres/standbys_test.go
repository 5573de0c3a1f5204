package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// TestWaitForStandbysHoldsUntilTheStandbyFlushed: the wait returns at
// once when the standby holds every commit; while its replication is
// stalled, a commit made since is reported behind at the end of the
// wait; once replication goes on, the same wait returns. Asking for more
// standbys than stream is behind; asking for none never waits.
func TestWaitForStandbysHoldsUntilTheStandbyFlushed(t *testing.T) {
	primary, _ := testenv.PostgresHA(t)
	s := pgtest.NewAt(t, primary, postgres.Options{})
	ctx := context.Background()
	all := postgres.Standbys{All: true}
	if err := s.WaitForStandbys(ctx, all, 10*time.Second); err != nil {
		t.Fatalf("with the standby caught up: %v", err)
	}
	if err := s.WaitForStandbys(ctx, postgres.Standbys{N: 2}, 200*time.Millisecond); !errors.Is(err, postgres.ErrStandbysBehind) {
		t.Fatalf("two standbys asked of one: %v", err)
	}
	if err := s.WaitForStandbys(ctx, postgres.Standbys{N: 1}, 10*time.Second); err != nil {
		t.Fatalf("one standby asked of one: %v", err)
	}

	resume := pgtest.StallReplication(t, s)
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE stalled (n int); INSERT INTO stalled VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := s.WaitForStandbys(ctx, all, 500*time.Millisecond)
	if !errors.Is(err, postgres.ErrStandbysBehind) {
		t.Fatalf("a commit the stalled standby cannot have: %v", err)
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("reported behind after %s, before its wait ended", took)
	}
	if err := s.WaitForStandbys(ctx, postgres.Standbys{}, time.Hour); err != nil {
		t.Errorf("no standby asked for: %v", err)
	}
	resume()
	if err := s.WaitForStandbys(ctx, all, 30*time.Second); err != nil {
		t.Fatalf("after replication went on: %v", err)
	}
}
