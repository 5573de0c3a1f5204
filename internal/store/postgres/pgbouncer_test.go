package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

var bouncerDBs atomic.Int64

// TestConformanceThroughPgBouncer: the store's conformance suite, each
// case on a database of its own reached through PgBouncer in transaction
// pooling mode (a server connection per transaction, so no session
// state: no named prepared statement, no search_path, no LISTEN), with
// pgx's exec mode (default_query_exec_mode=exec in the DSN) and the
// LISTEN connection direct to the server (ListenDSN).
func TestConformanceThroughPgBouncer(t *testing.T) {
	bouncer := testenv.PgBouncer(t)
	direct := testenv.PostgresURL(t)
	ctx := context.Background()
	storetest.Run(t, func(t *testing.T) store.Store {
		name := fmt.Sprintf("bouncer_%d_%d", time.Now().UnixNano()%1e9, bouncerDBs.Add(1))
		admin, err := pgx.Connect(ctx, direct)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if c, err := pgx.Connect(context.Background(), direct); err == nil {
				c.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
				c.Close(context.Background())
			}
		})
		u, err := url.Parse(direct)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + name
		listen := u.String()
		u.Host = bouncer
		q := u.Query()
		q.Set("default_query_exec_mode", "exec")
		u.RawQuery = q.Encode()
		s, err := postgres.Open(ctx, u.String(), postgres.Options{ListenDSN: listen})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestListenBesidePgBouncer: behind PgBouncer in transaction mode a
// LISTEN hears nothing, so the relays would wait for their idle poll;
// with ListenDSN, the LISTEN goes to the server and a notification
// wakes them.
func TestListenBesidePgBouncer(t *testing.T) {
	bouncer := testenv.PgBouncer(t)
	direct := testenv.PostgresURL(t)
	ctx := context.Background()
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = bouncer
	q := u.Query()
	q.Set("default_query_exec_mode", "exec")
	u.RawQuery = q.Encode()
	heard := func(listenDSN string) bool {
		s, err := postgres.Open(ctx, u.String(), postgres.Options{ListenDSN: listenDSN})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		woken := make(chan struct{}, 16)
		lctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Listen(lctx, func() { woken <- struct{}{} }, nil)
		}()
		defer func() { stop(); <-done }()
		select {
		case <-woken: // listening
		case <-time.After(10 * time.Second):
			t.Fatal("never listened")
		}
		notifier, err := pgx.Connect(ctx, direct)
		if err != nil {
			t.Fatal(err)
		}
		defer notifier.Close(ctx)
		deadline := time.After(2 * time.Second)
		for {
			if _, err := notifier.Exec(ctx, "SELECT pg_notify($1, '')", postgres.NotifyChannel); err != nil {
				t.Fatal(err)
			}
			select {
			case <-woken:
				return true
			case <-deadline:
				return false
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if !heard(direct) {
		t.Error("with ListenDSN, a notification did not wake the relay")
	}
	if heard("") {
		t.Error("a LISTEN through PgBouncer in transaction mode heard a notification: the test cannot tell")
	}
}
