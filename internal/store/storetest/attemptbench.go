package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// BenchCompleteManyAttempts measures what recording attempts costs the
// relay's hot path: CompleteMany of batches of 32 claimed rows, each
// completion with its attempt (as the relay records them) or without (no
// history row written), in alternating rounds in the same run; it reports
// the time per batch of each and their ratio.
func BenchCompleteManyAttempts(b *testing.B, s store.Store) {
	const batch, rounds = 32, 100
	ctx := context.Background()
	seq := 0
	claimBatch := func() []outbox.Row {
		ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "bench", Path: fmt.Sprintf("b%d", seq), Size: 1, MTime: t0,
			SHA256: "x", CorrelationID: "c", Now: t0})
		if err != nil {
			b.Fatal(err)
		}
		for range batch {
			seq++
			key := fmt.Sprintf("payment:BENCH:%d", seq)
			if err := ing.AddAck(ctx, outbox.Effect{Kind: "payment.posted", Key: key, OrderingKey: key, Sink: "bench",
				Payload: json.RawMessage(`{"amount":"150.00"}`)}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
			b.Fatal(err)
		}
		rows, err := s.Claim(ctx, t0, []string{"bench"}, batch, time.Minute)
		if err != nil || len(rows) != batch {
			b.Fatalf("claim: %d %v", len(rows), err)
		}
		return rows
	}
	complete := func(withAttempts bool) time.Duration {
		rows := claimBatch()
		done := make([]outbox.Completion, len(rows))
		for i, r := range rows {
			done[i] = outbox.Completion{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 204}
			if withAttempts {
				done[i].Attempt = &outbox.Attempt{At: t0, Latency: 800 * time.Microsecond, HTTPStatus: 204, Class: "2xx"}
			}
		}
		start := time.Now()
		lost, err := s.CompleteMany(ctx, done, t0)
		took := time.Since(start)
		if err != nil || len(lost) != 0 {
			b.Fatalf("complete: lost %v, %v", lost, err)
		}
		return took
	}
	var with, without time.Duration
	for b.Loop() {
		with, without = 0, 0
		for range rounds {
			without += complete(false)
			with += complete(true)
		}
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / rounds }
	b.ReportMetric(us(without), "us/batch-no-history")
	b.ReportMetric(us(with), "us/batch-history")
	b.ReportMetric(float64(with)/float64(without), "ratio")
}
