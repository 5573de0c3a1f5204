package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
)

// BenchmarkClaimBesideDisabledSink: the cost of one claim (16 rows of an
// enabled sink with 20,000 rows waiting) when another sink is disabled with
// 20,000 rows of its own, due before the enabled sink's, against the same
// claim with no other sink's rows (none-disabled), in one run:
//   - parked: the rows were waiting when the sink was disabled (the disable
//     moves their next attempt out of the claims' way);
//   - unparked: the rows arrived after the disable (due, so every claim
//     walks past them until the relays' next ParkDisabled, every
//     relay.lease/2);
//   - reparked: the same rows after ParkDisabled.
//
// Run: go test ./internal/store/postgres -run XXX -bench ClaimBesideDisabledSink
func BenchmarkClaimBesideDisabledSink(b *testing.B) {
	const n = 20000
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	insert := func(b *testing.B, s *Store, sink string, at time.Time) {
		if _, err := s.pool.Exec(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id, payload_json,
			next_attempt_at, created_at, updated_at)
			SELECT $1 || i, 'payment.posted', $1, $1 || i, 'c', '{}', $2, $2, $2 FROM generate_series(1, $3) i`,
			sink, at, n); err != nil {
			b.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, "ANALYZE outbox"); err != nil {
			b.Fatal(err)
		}
	}
	claim := func(b *testing.B, s *Store) {
		now := t0.Add(time.Hour)
		for b.Loop() {
			rows, err := s.Claim(ctx, now, []string{"ledger"}, 16, time.Minute)
			if err != nil || len(rows) != 16 {
				b.Fatalf("claimed %d: %v", len(rows), err)
			}
			b.StopTimer()
			for _, r := range rows {
				if err := s.Snooze(ctx, r.ID, r.LeaseToken, now, t0); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
	b.Run("none-disabled", func(b *testing.B) {
		s := newStore(b).(*Store)
		insert(b, s, "ledger", t0)
		claim(b, s)
	})
	b.Run("parked", func(b *testing.B) {
		s := newStore(b).(*Store)
		insert(b, s, "gone", t0.Add(-time.Minute))
		insert(b, s, "ledger", t0)
		if _, err := s.DisableSink(ctx, "gone", outbox.GoneReason, "relay", t0, t0); err != nil {
			b.Fatal(err)
		}
		claim(b, s)
	})
	b.Run("unparked", func(b *testing.B) {
		s := newStore(b).(*Store)
		if _, err := s.DisableSink(ctx, "gone", outbox.GoneReason, "relay", t0, t0); err != nil {
			b.Fatal(err)
		}
		insert(b, s, "gone", t0.Add(-time.Minute))
		insert(b, s, "ledger", t0)
		claim(b, s)
	})
	b.Run("reparked", func(b *testing.B) {
		s := newStore(b).(*Store)
		if _, err := s.DisableSink(ctx, "gone", outbox.GoneReason, "relay", t0, t0); err != nil {
			b.Fatal(err)
		}
		insert(b, s, "gone", t0.Add(-time.Minute))
		insert(b, s, "ledger", t0)
		if parked, err := s.ParkDisabled(ctx); err != nil || parked != n {
			b.Fatalf("parked %d: %v", parked, err)
		}
		claim(b, s)
	})
}
