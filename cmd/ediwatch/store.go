package main

import (
	"context"
	"fmt"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
)

// openStore opens the configured store, its pool bounded by
// store.max_conns when set (else the driver's default), and, unless
// store.migrate is off (or migrate is false), applies pending migrations.
func openStore(ctx context.Context, c config.Store, migrate bool) (store.Store, error) {
	dsn, err := c.ResolveDSN()
	if err != nil {
		return nil, err
	}
	var s store.Store
	switch c.Driver {
	case "postgres":
		s, err = postgres.Open(ctx, dsn, postgres.Options{MaxConns: int32(c.MaxConns)})
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
	return s, nil
}

func loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, &exitError{code: 2, err: err}
	}
	return cfg, nil
}
