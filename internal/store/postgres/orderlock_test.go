package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestOrderLockWritesItsRowOnce: rows inserted without an id (999s, one
// ordering key a partner) lock their (sink, ordering key) through
// outbox_order. A second insert of the same key and time in a transaction
// locks the row again without writing another version of it (each
// version made the next insert of a many-interchange file walk all those
// before: O(n²) in its 999s), and a transaction that touches an existing
// row only through such an insert still holds its lock.
func TestOrderLockWritesItsRowOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	insert := func(tx pgx.Tx, key string) {
		t.Helper()
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id,
			payload_packed, next_attempt_at, created_at, updated_at)
			VALUES ($1, 'ack.999', 'acks', 'ack999:partner', '', 'c', '\x00', $2, $2, $2)`,
			key, at); err != nil {
			t.Fatal(err)
		}
	}
	version := func(tx pgx.Tx) string {
		t.Helper()
		var v string
		if err := tx.QueryRow(ctx, `SELECT ctid::text FROM outbox_order
			WHERE sink = 'acks' AND ordering_key = 'ack999:partner'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	insert(tx, "ack999:1")
	first := version(tx)
	insert(tx, "ack999:2")
	insert(tx, "ack999:3")
	if v := version(tx); v != first {
		t.Errorf("outbox_order's row rewritten by inserts of its key at its time: %s, then %s", first, v)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// The row exists with that time: a later insert at the same time
	// writes nothing to it, and must still hold its lock.
	tx, err = s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	insert(tx, "ack999:4")
	other, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	_, err = other.Exec(ctx, `SELECT 1 FROM outbox_order WHERE sink = 'acks' AND ordering_key = 'ack999:partner'
		FOR UPDATE NOWAIT`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" { // lock_not_available
		t.Errorf("another transaction locked the ordering key of an open insert: %v", err)
	}
}
