package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
)

// TestFailoverIsNoticedOnReconnect: a store on a primary and its standby
// (a multi-host DSN, read-write sessions) says nothing while it stays on
// the primary; when the primary dies and the standby is promoted, the
// first connection to it reports the change, same system and the next
// timeline, once. A store opened after the failover, which the new
// primary's record already names, reports nothing.
func TestFailoverIsNoticedOnReconnect(t *testing.T) {
	c := pgtest.NewCluster(t)
	ctx := context.Background()
	type change struct{ old, new postgres.ServerIdentity }
	changes := make(chan change, 8)
	s, err := postgres.Open(ctx, c.DSN(), postgres.Options{OnFailover: func(old, new postgres.ServerIdentity) {
		changes <- change{old, new}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// A connection after the migration records the server; the standby
	// holds the record before the primary dies.
	s.Pool().Reset()
	if _, err := s.Pool().Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitForStandbys(ctx, postgres.Standbys{All: true}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case ch := <-changes:
		t.Fatalf("a change reported before any failover: %v -> %v", ch.old, ch.new)
	case <-time.After(200 * time.Millisecond):
	}

	c.KillPrimary()
	c.Promote()
	promoted := time.Now()
	for {
		if _, err := s.Pool().Exec(ctx, `SELECT 1`); err == nil {
			break
		}
		if time.Since(promoted) > 60*time.Second {
			t.Fatal("the store never reached the promoted standby")
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case ch := <-changes:
		if ch.old.SystemID != ch.new.SystemID || ch.new.Timeline != ch.old.Timeline+1 {
			t.Errorf("the change reported: %v -> %v, want the same system on the next timeline", ch.old, ch.new)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failover was not reported")
	}
	// More connections to the new primary report nothing more.
	s.Pool().Reset()
	if _, err := s.Pool().Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	later, err := postgres.Open(ctx, c.DSN(), postgres.Options{OnFailover: func(old, new postgres.ServerIdentity) {
		changes <- change{old, new}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	if _, err := later.Pool().Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	select {
	case ch := <-changes:
		t.Errorf("reported again: %v -> %v", ch.old, ch.new)
	case <-time.After(500 * time.Millisecond):
	}
}
