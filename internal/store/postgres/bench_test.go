package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// BenchmarkIngestVsBareCommit: ingests of a one-set 835 per second beside
// single-row INSERT+COMMIT per second on the same database, at 1, 4 and 16
// writers. Run: go test ./internal/store/postgres -run XXX -bench . -benchtime 1x
func BenchmarkIngestVsBareCommit(b *testing.B) {
	s := newStore(b)
	bs := s.(*Store)
	defer bs.pool.Exec(context.Background(), "DROP TABLE IF EXISTS bare_insert")
	if _, err := bs.pool.Exec(context.Background(), "CREATE TABLE bare_insert (v bigint, at timestamptz)"); err != nil {
		b.Fatal(err)
	}
	storetest.BenchIngestVsBareCommit(b, s, func(ctx context.Context, v int64) error {
		_, err := bs.pool.Exec(ctx, "INSERT INTO bare_insert (v, at) VALUES ($1, now())", v)
		return err
	}, 3*time.Second)
}

// BenchmarkIngest100MB: a 100 MB 835 (60,580 sets of 8 claims) ingested
// twice into a fresh store, beside sha256 of the same bytes.
// Run: go test ./internal/store/postgres -run XXX -bench Ingest100MB -benchtime 1x
func BenchmarkIngest100MB(b *testing.B) {
	data := storetest.BigFile(b, storetest.BigRemit)
	storetest.BenchIngestBigFile(b, newStore(b), data, nil, 15)
}

// BenchmarkCompleteManyAttempts: CompleteMany of 32 rows with and without
// their attempts recorded, side by side.
// Run: go test ./internal/store/postgres -run XXX -bench CompleteManyAttempts -benchtime 1x
func BenchmarkCompleteManyAttempts(b *testing.B) {
	storetest.BenchCompleteManyAttempts(b, newStore(b))
}

func BenchmarkResendManyInterchanges(b *testing.B) {
	storetest.BenchResendManyInterchanges(b, newStore)
}
