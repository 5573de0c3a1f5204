package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/ediwatch/ediwatch/internal/inbox"
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

// TestParkedRowsAreSwept: storetest.ParkedRowsAreSwept, the row ahead
// delivered by hand.
func TestParkedRowsAreSwept(t *testing.T) {
	s := newStore(t).(*Store)
	storetest.ParkedRowsAreSwept(t, s, func(t *testing.T, id int64) {
		if _, err := s.Pool().Exec(context.Background(), `UPDATE outbox SET status = 'delivered' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	})
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
	if err := s.CheckLease(ctx, inbox.Fence{Name: "poll:acme:/out", Token: tok}, now.Add(time.Hour)); err != nil {
		t.Errorf("a fast caller clock expired a live lease: %v", err)
	}
	s.AcquireLease(ctx, "poll:acme:/out", "a", -time.Minute, now) // lapsed by the database clock
	if err := s.CheckLease(ctx, inbox.Fence{Name: "poll:acme:/out", Token: tok}, now.Add(-time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("a slow caller clock kept a lapsed lease: %v", err)
	}
	if _, ok, _ := s.AcquireLease(ctx, "poll:acme:/out", "b", time.Minute, now.Add(-time.Hour)); !ok {
		t.Error("a lapsed lease was not free for a replica with a slow clock")
	}
}

// TestDeliveryOrderIsCommitOrder: two explicit transactions insert rows of
// one sink and ordering key; the second tries to commit first. Ids of one
// key are taken in commit order (the second inserter waits for the first
// transaction), so the claimer, which goes by id, delivers in commit order
// and never delivers the later-inserted row before the earlier one.
func TestDeliveryOrderIsCommitOrder(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	insert := func(tx pgx.Tx, key string) {
		t.Helper()
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id, payload_json,
			next_attempt_at, created_at, updated_at) VALUES ($1, 'claim.received', 'ledger', 'claim:K', 'c', '{}', $2, $2, $2)`,
			key, time.Unix(0, 0)); err != nil {
			t.Error(err)
		}
	}
	var mu sync.Mutex
	var committed, delivered []string
	tx1, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insert(tx1, "first")
	second := make(chan struct{})
	var pid atomic.Int32
	go func() {
		defer close(second)
		tx2, err := s.pool.Begin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		var p int32
		tx2.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&p)
		pid.Store(p)
		insert(tx2, "second")
		if err := tx2.Commit(ctx); err != nil {
			t.Error(err)
		}
		mu.Lock()
		committed = append(committed, "second")
		mu.Unlock()
	}()
	// Wait until the second transaction has committed or waits for the first.
	for waiting := false; !waiting; {
		select {
		case <-second:
			waiting = true
		case <-time.After(10 * time.Millisecond):
			var n int
			s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
				AND pid = $1`, pid.Load()).Scan(&n)
			waiting = n > 0
		}
	}
	deliver := func() {
		rows, err := s.Claim(ctx, time.Unix(1, 0), []string{"ledger"}, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			delivered = append(delivered, r.EffectKey)
			if err := storetest.Complete(ctx, s, r.ID, r.LeaseToken, time.Unix(1, 0), 200); err != nil {
				t.Fatal(err)
			}
		}
	}
	deliver() // while the first transaction is open
	// mu is held across the commit: a second transaction that waited for
	// the first cannot record its own commit before this one is recorded.
	mu.Lock()
	if err := tx1.Commit(ctx); err != nil {
		mu.Unlock()
		t.Fatal(err)
	}
	committed = append(committed, "first")
	mu.Unlock()
	<-second
	for range 3 {
		deliver()
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(delivered, ",") != "first,second" || strings.Join(committed, ",") != "first,second" {
		t.Errorf("committed %v, delivered %v; want both first, second", committed, delivered)
	}
}
