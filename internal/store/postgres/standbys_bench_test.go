package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// BenchmarkStandbyWait measures what store.wait_for_standbys adds to a
// file's post-processing on a primary with a healthy streaming standby:
// a commit (an insert) alone, then the same commit followed by the wait
// for the standby to flush it. Compare the two in one run:
//
//	go test ./internal/store/postgres -run XXX -bench StandbyWait
func BenchmarkStandbyWait(b *testing.B) {
	primary, _ := testenv.PostgresHA(b)
	s := pgtest.NewAt(b, primary, postgres.Options{})
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE bench_commit (n int)`); err != nil {
		b.Fatal(err)
	}
	commit := func(b *testing.B) {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO bench_commit VALUES (1)`); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("commit", func(b *testing.B) {
		for b.Loop() {
			commit(b)
		}
	})
	b.Run("commit+wait", func(b *testing.B) {
		for b.Loop() {
			commit(b)
			if err := s.WaitForStandbys(ctx, postgres.Standbys{All: true}, 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
}
