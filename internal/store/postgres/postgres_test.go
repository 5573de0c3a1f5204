package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var schemaSeq atomic.Int64

// newStore opens the test PostgreSQL with a schema private to t, dropped
// at the end.
func newStore(t testing.TB) store.Store {
	url := testenv.PostgresURL(t)
	schema := fmt.Sprintf("t_%d_%d", time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	ctx := context.Background()
	s, err := Open(ctx, url, Options{Schema: schema, MaxConns: 60})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		s.Close()
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestOpenRedactsPassword(t *testing.T) {
	_, err := Open(context.Background(), "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=1&bogus_param=%zz", Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v", err)
	}
}

// TestLeaseExpiryOnDatabaseClock: a replica whose clock runs an hour fast
// cannot take a lease that is live by the database's clock, and one whose
// clock runs an hour slow cannot keep a lapsed lease alive.
func TestLeaseExpiryOnDatabaseClock(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	tok, ok, err := s.AcquireLease(ctx, "poll:acme:/out", "a", time.Minute, now)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, ok, _ := s.AcquireLease(ctx, "poll:acme:/out", "b", time.Minute, now.Add(time.Hour)); ok {
		t.Fatal("a replica with a fast clock took a live lease")
	}
	if err := s.CheckLease(ctx, store.Fence{Name: "poll:acme:/out", Token: tok}, now.Add(time.Hour)); err != nil {
		t.Errorf("a fast caller clock expired a live lease: %v", err)
	}
	s.AcquireLease(ctx, "poll:acme:/out", "a", -time.Minute, now) // lapsed by the database clock
	if err := s.CheckLease(ctx, store.Fence{Name: "poll:acme:/out", Token: tok}, now.Add(-time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("a slow caller clock kept a lapsed lease: %v", err)
	}
	if _, ok, _ := s.AcquireLease(ctx, "poll:acme:/out", "b", time.Minute, now.Add(-time.Hour)); !ok {
		t.Error("a lapsed lease was not free for a replica with a slow clock")
	}
}
