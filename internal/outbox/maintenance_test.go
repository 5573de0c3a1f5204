package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
)

type statsFunc func(ctx context.Context, now time.Time) ([]outbox.SinkStats, error)

func (f statsFunc) Stats(ctx context.Context, now time.Time) ([]outbox.SinkStats, error) {
	return f(ctx, now)
}

// runGauges runs g for one round, answered by stats; the second round
// stops it.
func runGauges(t *testing.T, g *outbox.Gauges, stats statsFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := 0
	g.Store = statsFunc(func(ctx context.Context, now time.Time) ([]outbox.SinkStats, error) {
		if rounds++; rounds > 1 {
			cancel()
			return nil, ctx.Err()
		}
		return stats(ctx, now)
	})
	g.Every = time.Millisecond
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestGaugesReadTheInjectedClock: the gauges pass their clock's time to
// reconciliation and to the stats query, and set the gauges per sink.
func TestGaugesReadTheInjectedClock(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m := metrics.New(prometheus.NewRegistry())
	var divAt, statsAt time.Time
	g := &outbox.Gauges{Metrics: m, Log: zap.NewNop(), Now: func() time.Time { return at },
		Divergent: func(_ context.Context, now time.Time) (bool, error) { divAt = now; return true, nil }}
	runGauges(t, g, func(_ context.Context, now time.Time) ([]outbox.SinkStats, error) {
		statsAt = now
		return []outbox.SinkStats{{Sink: "erp", Pending: 2, Inflight: 1, Dead: 4, OldestPending: time.Minute}}, nil
	})
	if !divAt.Equal(at) || !statsAt.Equal(at) {
		t.Errorf("reconciled at %s, stats at %s, want both at %s", divAt, statsAt, at)
	}
	if got := testutil.ToFloat64(m.OutboxPending.WithLabelValues("erp")); got != 3 {
		t.Errorf("pending gauge = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.OutboxDead.WithLabelValues("erp")); got != 4 {
		t.Errorf("dead gauge = %v, want 4", got)
	}
	if got := testutil.ToFloat64(m.Divergence); got != 1 {
		t.Errorf("divergence gauge = %v, want 1", got)
	}
}

// TestGaugeErrorsAreLogged: a store that cannot be read is logged, not
// dropped.
func TestGaugeErrorsAreLogged(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	g := &outbox.Gauges{Metrics: metrics.New(prometheus.NewRegistry()), Log: zap.New(core),
		Divergent: func(context.Context, time.Time) (bool, error) { return false, errors.New("reconcile down") }}
	runGauges(t, g, func(context.Context, time.Time) ([]outbox.SinkStats, error) {
		return nil, errors.New("stats down")
	})
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
	}
	if len(msgs) != 2 {
		t.Errorf("logged %q, want the reconciliation and the stats failure", msgs)
	}
}

// TestGaugesOfASinkWithNoLiveRowFallToZero: stats list only sinks with
// live rows, so a sink whose last pending and dead rows are gone is
// missing from the next round; its gauges must read 0, not the last
// value.
func TestGaugesOfASinkWithNoLiveRowFallToZero(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	round := 0
	g := &outbox.Gauges{Metrics: m, Log: zap.NewNop(), Every: time.Millisecond,
		Divergent: func(context.Context, time.Time) (bool, error) { return false, nil }}
	g.Store = statsFunc(func(ctx context.Context, _ time.Time) ([]outbox.SinkStats, error) {
		switch round++; round {
		case 1:
			return []outbox.SinkStats{{Sink: "erp", Pending: 5, Dead: 2, OldestPending: time.Hour},
				{Sink: "acks", Pending: 1}}, nil
		case 2:
			return []outbox.SinkStats{{Sink: "acks", Pending: 1}}, nil
		default:
			cancel()
			return nil, ctx.Err()
		}
	})
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for name, gauge := range map[string]prometheus.Gauge{"pending": m.OutboxPending.WithLabelValues("erp"),
		"dead": m.OutboxDead.WithLabelValues("erp"), "oldest": m.OutboxOldestPending.WithLabelValues("erp")} {
		if got := testutil.ToFloat64(gauge); got != 0 {
			t.Errorf("erp %s gauge = %v after its live rows went, want 0", name, got)
		}
	}
	if got := testutil.ToFloat64(m.OutboxPending.WithLabelValues("acks")); got != 1 {
		t.Errorf("acks pending gauge = %v, want 1", got)
	}
}
