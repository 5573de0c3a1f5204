package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/history"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestHistoryRowsMatchIngest holds internal/store/history to what a real
// ingest writes: the mean width of its inbox rows and of its unpruned
// payment.posted and ack.999 rows is within a tenth of theirs for a file
// of ten remittances of eight claims. bench/history's database sizes
// (and the plan tests' tables) are only as true as this.
func TestHistoryRowsMatchIngest(t *testing.T) {
	ctx := context.Background()
	real := newStore(t).(*Store)
	var file bytes.Buffer
	if _, err := (x12gen.Remit{Control: 123456789, SetsPerGroup: 10, ClaimsPerSet: 8, LinesPerClaim: 1, Trace: "T",
		EOL: "\n"}).Write(&file); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file.Bytes())
	now := time.Now().UTC()
	if _, err := inbox.Ingest(ctx, inbox.Options{Store: real, Routes: storetest.Routes}, inbox.FileInfo{
		Source: "src1", Path: "/outbound/835/ERA_000000001.835", Size: int64(file.Len()), MTime: now,
		SHA256: hex.EncodeToString(sum[:]), CorrelationID: store.NewCorrelationID(), Now: now,
	}, bytes.NewReader(file.Bytes())); err != nil {
		t.Fatal(err)
	}
	built := newStore(t).(*Store)
	if err := history.Postgres(ctx, built.pool, 200, 1, now, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, q string }{
		{"inbox rows", `SELECT avg(pg_column_size(t.*))::float8, count(*) FROM inbox t`},
		{"payment.posted rows", `SELECT avg(pg_column_size(t.*))::float8, count(*) FROM outbox t
			WHERE kind = 'payment.posted' AND NOT payload_pruned`},
		{"ack.999 rows", `SELECT avg(pg_column_size(t.*))::float8, count(*) FROM outbox t
			WHERE kind = 'ack.999' AND NOT payload_pruned`},
	} {
		var want, got float64
		var n, m int
		if err := real.pool.QueryRow(ctx, c.q).Scan(&want, &n); err != nil || n == 0 {
			t.Fatalf("%s of the ingest: %v (%d rows)", c.what, err, n)
		}
		if err := built.pool.QueryRow(ctx, c.q).Scan(&got, &m); err != nil || m == 0 {
			t.Fatalf("%s of the history: %v (%d rows)", c.what, err, m)
		}
		if math.Abs(got/want-1) > 0.1 {
			t.Errorf("%s: the history's are %.0f bytes wide, a real ingest's %.0f", c.what, got, want)
		} else {
			t.Logf("%s: history %.0f bytes, ingest %.0f", c.what, got, want)
		}
	}
}
