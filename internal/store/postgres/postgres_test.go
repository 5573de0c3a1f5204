package postgres

import (
	"context"
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
