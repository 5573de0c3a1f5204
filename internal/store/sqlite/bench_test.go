package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// BenchmarkIngestVsBareCommit: the same comparison on the embedded store.
// Run: go test ./internal/store/sqlite -run XXX -bench . -benchtime 1x
func BenchmarkIngestVsBareCommit(b *testing.B) {
	s := newStore(b)
	db := s.(*Store).db
	if _, err := db.Exec("CREATE TABLE bare_insert (v INTEGER, at INTEGER)"); err != nil {
		b.Fatal(err)
	}
	storetest.BenchIngestVsBareCommit(b, s, func(ctx context.Context, v int64) error {
		_, err := db.ExecContext(ctx, "INSERT INTO bare_insert (v, at) VALUES (?, ?)", v, time.Now().UnixMicro())
		return err
	}, 3*time.Second)
}
