package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// TestConsolePoolIsItsOwnBoundedAndTimed: the pool the console, the
// gauges and the silence alarm read through holds store.console_conns
// connections, each statement cancelled by the server after
// store.console_timeout, and is not the relay's and ingest's: with every
// connection of it taken, the daemon's own store still answers at once.
func TestConsolePoolIsItsOwnBoundedAndTimed(t *testing.T) {
	url := testenv.PostgresURL(t)
	ctx := context.Background()
	c := config.Default().Store
	c.Driver, c.DSN, c.MaxConns = "postgres", pgSchema(t, url), 3
	c.ConsoleConns, c.ConsoleTimeout = 2, config.Duration(time.Second)
	st, err := openStore(ctx, c, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reads, closeReads, err := openConsoleStore(ctx, c, st)
	if err != nil {
		t.Fatal(err)
	}
	defer closeReads()
	pool := reads.(*postgres.Store).Pool()

	start := time.Now()
	_, err = pool.Exec(ctx, "SELECT pg_sleep(30)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("a 30 s statement on the console's pool: %v, want the server's statement timeout (57014)", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the statement ran %s past a 1 s timeout", took)
	}

	var held []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if c, err := pool.Acquire(short); err == nil {
		c.Release()
		t.Fatal("a third connection of a console pool of two")
	}
	busy, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if _, err := st.ListFiles(busy, inbox.FileFilter{}, 10); err != nil {
		t.Fatalf("the daemon's store, with the console's pool all taken: %v", err)
	}
	if _, err := st.Stats(busy, time.Now()); err != nil {
		t.Fatalf("the daemon's store, with the console's pool all taken: %v", err)
	}
}
