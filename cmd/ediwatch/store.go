package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/migrations"
)

// openStore opens the configured store, its pool bounded by
// store.max_conns when set (else the driver's default), and, unless
// store.migrate is off (or migrate is false), applies pending migrations.
func openStore(ctx context.Context, c config.Store, migrate bool) (store.Store, error) {
	return openStoreWatched(ctx, c, migrate, nil)
}

// openStoreWatched is openStore whose PostgreSQL store tells onFailover
// when a new connection reaches another server than the last one
// (postgres.Options.OnFailover).
func openStoreWatched(ctx context.Context, c config.Store, migrate bool,
	onFailover func(old, new postgres.ServerIdentity)) (store.Store, error) {
	dsn, err := c.ResolveDSN()
	if err != nil {
		return nil, err
	}
	if c.Driver == "postgres" && c.DSNFile != "" {
		if err := config.CheckPostgresDSN(dsn); err != nil {
			return nil, &exitError{code: 2, err: err}
		}
	}
	var s store.Store
	switch c.Driver {
	case "postgres":
		s, err = postgres.Open(ctx, dsn, postgres.Options{MaxConns: int32(c.MaxConns), OnFailover: onFailover,
			ListenDSN: c.ListenDSN})
	case "sqlite":
		s, err = sqlite.OpenWith(ctx, dsn, sqlite.Options{MaxConns: c.MaxConns})
	default:
		return nil, fmt.Errorf("store.driver: unknown driver %q", c.Driver)
	}
	if err != nil {
		return nil, err
	}
	if migrate && c.Migrate {
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := checkSchema(ctx, c.Driver, s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openConsoleStore opens the second, small pool of the configured store
// that the console, the outbox gauges and the silence alarm read through:
// store.console_conns connections, each PostgreSQL statement bounded by
// store.console_timeout. However many viewers the console has and however
// slow their pages, the relay and ingest keep every connection of st's
// pool. It does not migrate (st, opened first, did). A SQLite database in
// memory, which a second pool would not see, is read through st; close
// then closes nothing.
func openConsoleStore(ctx context.Context, c config.Store, st store.Store) (console store.Store, close func(), err error) {
	dsn, err := c.ResolveDSN()
	if err != nil {
		return nil, nil, err
	}
	switch c.Driver {
	case "postgres":
		// Behind a pooler (store.listen_dsn set: PgBouncer refuses a
		// startup parameter it does not know) the pool sends no
		// statement_timeout; the console's own deadline, which cancels a
		// statement on the server through the pooler, bounds its reads.
		timeout := c.ConsoleTimeout.D()
		if c.ListenDSN != "" {
			timeout = 0
		}
		console, err = postgres.Open(ctx, dsn, postgres.Options{MaxConns: int32(c.ConsoleConns),
			StatementTimeout: timeout})
	case "sqlite":
		if strings.Contains(dsn, ":memory:") || strings.Contains(dsn, "mode=memory") {
			return st, func() {}, nil
		}
		console, err = sqlite.OpenWith(ctx, dsn, sqlite.Options{MaxConns: c.ConsoleConns})
	default:
		return nil, nil, fmt.Errorf("store.driver: unknown driver %q", c.Driver)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("the console's pool: %w", err)
	}
	return console, console.Close, nil
}

// standbyWait is how long a poll, its ingests done, waits for the
// standbys to hold their commits before its files are left for the next
// poll.
const standbyWait = time.Second

// standbysWait returns the wait of post-processing for the standbys that
// store.wait_for_standbys asks for, nil when there is none to make (a
// SQLite store, or 0).
func standbysWait(c config.Store, st store.Store) func(context.Context) error {
	pg, ok := st.(*postgres.Store)
	all, n := c.Standbys()
	if !ok || !all && n == 0 {
		return nil
	}
	want := postgres.Standbys{All: all, N: n}
	return func(ctx context.Context) error { return pg.WaitForStandbys(ctx, want, standbyWait) }
}

// checkSchema refuses a database migrated by a newer ediwatch: this build
// would read and write it as the schema it knows (a column renamed, a
// payload stored another way) and could deliver what it misreads. During
// a rolling upgrade, replicas still on the older build stop with this
// error instead (from this build on).
func checkSchema(ctx context.Context, driver string, s store.Store) error {
	v, ok := s.(interface {
		SchemaVersion(ctx context.Context) (int, error)
	})
	if !ok {
		return nil
	}
	have, err := v.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	known, err := migrations.Latest(driver)
	if err != nil {
		return err
	}
	if have > known {
		return &exitError{code: 2, err: fmt.Errorf("the %s store's schema is at migration %d, newer than this ediwatch "+
			"knows (%d): another replica or `ediwatch migrate` of a newer version migrated it; run that version", driver, have, known)}
	}
	return nil
}

// watchSchema checks the store's schema every interval until ctx ends, and
// returns checkSchema's refusal once the schema is newer than this build
// knows: a replica still running an older build stops, loudly, when
// another replica (or `ediwatch migrate` of a newer version) migrates the
// database under it, instead of going on reading and writing it as the
// schema it knows. A check that fails otherwise (the database unreachable
// for a moment) is logged and tried again at the next interval.
func watchSchema(ctx context.Context, driver string, s store.Store, every time.Duration, log *zap.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := checkSchema(ctx, driver, s)
		var exit *exitError
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.As(err, &exit):
			log.Error("stopping: the store's schema changed under this replica", zap.Error(err))
			return err
		default:
			log.Warn("schema check failed; trying again", zap.Error(err), zap.Duration("retry_in", every))
		}
	}
}

// schemaCheckEvery is how often a running daemon checks the store's schema
// (watchSchema): every 30 s, or as often as its most frequent poll, so no
// poll ingests much against a schema migrated under it.
func schemaCheckEvery(cfg config.Config) time.Duration {
	every := 30 * time.Second
	for _, src := range cfg.Sources {
		if d := src.PollInterval.D(); d > 0 && d < every {
			every = d
		}
	}
	return every
}

func loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, &exitError{code: 2, err: err}
	}
	return cfg, nil
}
