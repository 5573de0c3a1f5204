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
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/history"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestHistoryRowsMatchIngest holds internal/store/history to what a real
// ingest writes: the mean width of its inbox rows and of its
// payment.posted and ack.999 rows, before and after retention.payloads,
// is within a tenth of theirs for files of ten remittances of eight
// claims. bench/history's database sizes
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
	// The real rows delivered and their payloads pruned, as a month
	// later; a copy of the file under other control numbers stays
	// unpruned.
	rows, err := real.Claim(ctx, now, []string{"ledger", "acks"}, 100, time.Minute)
	if err != nil || len(rows) != 11 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	var done []outbox.Completion
	for _, r := range rows {
		done = append(done, outbox.Completion{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 200,
			Attempt: &outbox.Attempt{At: now, Latency: time.Millisecond, HTTPStatus: 200, Class: "2xx"}})
	}
	if lost, err := real.CompleteMany(ctx, done, now); err != nil || len(lost) != 0 {
		t.Fatalf("deliver: %v %v", lost, err)
	}
	if n, err := real.PrunePayloads(ctx, now.Add(time.Hour), 100); err != nil || n != 11 {
		t.Fatalf("prune payloads: %d %v", n, err)
	}
	file.Reset()
	if _, err := (x12gen.Remit{Control: 123456790, SetsPerGroup: 10, ClaimsPerSet: 8, LinesPerClaim: 1, Trace: "U",
		EOL: "\n"}).Write(&file); err != nil {
		t.Fatal(err)
	}
	if _, err := inbox.Ingest(ctx, inbox.Options{Store: real, Routes: storetest.Routes}, inbox.FileInfo{
		Source: "src1", Path: "/outbound/835/ERA_000000002.835", Size: int64(file.Len()), MTime: now,
		SHA256: hex.EncodeToString(sum[:]), CorrelationID: store.NewCorrelationID(), Now: now,
	}, bytes.NewReader(file.Bytes())); err != nil {
		t.Fatal(err)
	}
	// A history of 60 days: half of it past retention.payloads.
	built := newStore(t).(*Store)
	if err := history.Postgres(ctx, built.pool, 200, 60, now, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, q string }{
		{"inbox rows", `SELECT avg(pg_column_size(t.*))::float8, count(*) FROM inbox t`},
		{"payment.posted rows", `SELECT avg(pg_column_size(t.*))::float8, count(*) FROM outbox t
			WHERE kind = 'payment.posted' AND NOT payload_pruned`},
		{"ack.999 rows", `SELECT avg(pg_column_size(t.*))::float8, count(*) FROM outbox t
			WHERE kind = 'ack.999' AND NOT payload_pruned`},
		{"pruned payment.posted rows", `SELECT avg(pg_column_size(t.*))::float8, count(*) FROM outbox t
			WHERE kind = 'payment.posted' AND payload_pruned`},
		{"pruned ack.999 rows", `SELECT avg(pg_column_size(t.*))::float8, count(*) FROM outbox t
			WHERE kind = 'ack.999' AND payload_pruned`},
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

// TestReconcileReadsNoPayload: see storetest.ReconcileReadsNoPayload.
func TestReconcileReadsNoPayload(t *testing.T) {
	s := newStore(t).(*Store)
	storetest.ReconcileReadsNoPayload(t, s, func(ctx context.Context) (map[string][]byte, error) {
		rows, err := s.pool.Query(ctx, `SELECT effect_key, payload_packed FROM outbox WHERE kind = 'payment.posted'`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string][]byte{}
		for rows.Next() {
			var key string
			var p []byte
			if err := rows.Scan(&key, &p); err != nil {
				return nil, err
			}
			out[key] = p
		}
		return out, rows.Err()
	}, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `UPDATE outbox SET payload_packed = '\x01ffff'::bytea WHERE kind = 'payment.posted'`)
		return err
	})
}
