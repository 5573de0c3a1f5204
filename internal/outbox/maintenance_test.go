package outbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
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

// cutoffs is a PruneStore that records the cutoffs it is asked to prune
// before, and fails Prune when told to.
type cutoffs struct {
	keys, payloads []time.Time
	failKeys       bool
}

func (c *cutoffs) AcquireLease(context.Context, string, string, time.Duration, time.Time) (int64, bool, error) {
	return 1, true, nil
}

func (c *cutoffs) ReleaseLease(context.Context, string, string, int64) error { return nil }

func (c *cutoffs) Prune(_ context.Context, before time.Time, _ int) (int, error) {
	c.keys = append(c.keys, before)
	if c.failKeys {
		return 0, errors.New("database gone")
	}
	return 1, nil
}

func (c *cutoffs) PrunePayloads(_ context.Context, before time.Time, _ int) (int, error) {
	c.payloads = append(c.payloads, before)
	return 1, nil
}

// TestPrunerPassCutsKeysAndPayloadsApart: a pass prunes rows past
// retention.keys and payloads past retention.payloads, each at its own
// cutoff; payloads are pruned even when the rows' prune failed, and not
// at all with no payload retention set.
func TestPrunerPassCutsKeysAndPayloadsApart(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	st := &cutoffs{failKeys: true}
	p := &outbox.Pruner{Store: st, Keys: 400 * day, Payloads: 30 * day, Log: zap.NewNop()}
	p.Pass(context.Background(), at)
	if len(st.keys) != 1 || !st.keys[0].Equal(at.Add(-400*day)) {
		t.Errorf("keys pruned before %v, want %v", st.keys, at.Add(-400*day))
	}
	if len(st.payloads) != 1 || !st.payloads[0].Equal(at.Add(-30*day)) {
		t.Errorf("payloads pruned before %v, want %v", st.payloads, at.Add(-30*day))
	}
	st = &cutoffs{}
	(&outbox.Pruner{Store: st, Keys: 400 * day, Log: zap.NewNop()}).Pass(context.Background(), at)
	if len(st.keys) != 1 || len(st.payloads) != 0 {
		t.Errorf("with no payload retention: keys %v, payloads %v", st.keys, st.payloads)
	}
}

// TestPrunerPassFoldsClosedDays: a pass folds the reconciliation of the
// closed days at its own time, after pruning (so a day retention drops is
// not folded first), even when the prune failed and with no payload
// retention.
func TestPrunerPassFoldsClosedDays(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, payloads := range []time.Duration{0, 30 * 24 * time.Hour} {
		st := &cutoffs{failKeys: true}
		var folds []time.Time
		p := &outbox.Pruner{Store: st, Keys: 400 * 24 * time.Hour, Payloads: payloads, Log: zap.NewNop(),
			Fold: func(_ context.Context, when time.Time) (int, error) {
				if len(st.keys) != 1 {
					t.Errorf("folded before pruning")
				}
				folds = append(folds, when)
				return 3, nil
			}}
		p.Pass(context.Background(), at)
		if len(folds) != 1 || !folds[0].Equal(at) {
			t.Errorf("payload retention %s: folded at %v, want once at %v", payloads, folds, at)
		}
	}
}

// countingPrunes is a store that counts the prune passes made through it.
type countingPrunes struct {
	store.Store
	passes atomic.Int32
}

func (c *countingPrunes) Prune(ctx context.Context, before time.Time, batch int) (int, error) {
	c.passes.Add(1)
	return c.Store.Prune(ctx, before, batch)
}

// TestMaintenanceLeaseChangesHands: a pruner that stops gives the
// maintenance lease up, so the next daemon prunes at its first renewal;
// a holder that was killed (it never renews) loses the lease once it
// lapses, to the next pruner, which prunes at once. On both stores.
func TestMaintenanceLeaseChangesHands(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		const renew = 40 * time.Millisecond
		run := func(holder string) (*countingPrunes, context.CancelFunc, chan error) {
			c := &countingPrunes{Store: st}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			p := &outbox.Pruner{Store: c, Keys: 400 * 24 * time.Hour, Holder: holder, Log: zap.NewNop(), Renew: renew}
			go func() { done <- p.Run(ctx) }()
			return c, cancel, done
		}
		waitPass := func(c *countingPrunes, who string) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for c.passes.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%s never pruned", who)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}

		a, stopA, doneA := run("daemon-a")
		waitPass(a, "the first daemon")
		stopA()
		<-doneA
		b, stopB, doneB := run("daemon-b")
		waitPass(b, "the daemon started after the first stopped")
		stopB()
		<-doneB

		// A holder that was killed: it took the lease and never renews.
		if _, ok, err := st.AcquireLease(context.Background(), outbox.MaintenanceLease, "killed", 5*renew, time.Now().UTC()); err != nil || !ok {
			t.Fatalf("lease for the killed holder: %v %v", ok, err)
		}
		c, stopC, doneC := run("daemon-c")
		defer func() { stopC(); <-doneC }()
		waitPass(c, "the daemon started after its predecessor was killed")
	})
}

// slowPrunes is a store whose prune passes take a while, counting how
// many run at once.
type slowPrunes struct {
	store.Store
	took              time.Duration
	running, mostOnce atomic.Int32
	passes            atomic.Int32
}

func (s *slowPrunes) Prune(ctx context.Context, before time.Time, batch int) (int, error) {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		m := s.mostOnce.Load()
		if n <= m || s.mostOnce.CompareAndSwap(m, n) {
			break
		}
	}
	s.passes.Add(1)
	select {
	case <-time.After(s.took):
	case <-ctx.Done():
	}
	return 0, nil
}

// TestAPruneLongerThanTheLeaseKeepsIt: a pass that outlasts the
// maintenance lease's TTL renews the lease while it runs, so a second
// replica never prunes beside it. On both stores.
func TestAPruneLongerThanTheLeaseKeepsIt(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		const renew = 100 * time.Millisecond // the lease lasts 500 ms
		slow := &slowPrunes{Store: st, took: 1500 * time.Millisecond}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, holder := range []string{"replica-a", "replica-b"} {
			p := &outbox.Pruner{Store: slow, Keys: 400 * 24 * time.Hour, Holder: holder, Log: zap.NewNop(),
				Renew: renew, Every: time.Hour}
			wg.Add(1)
			go func() { defer wg.Done(); p.Run(ctx) }()
		}
		time.Sleep(3500 * time.Millisecond) // seven lease lifetimes, two passes
		cancel()
		wg.Wait()
		if slow.passes.Load() == 0 {
			t.Fatal("no replica pruned")
		}
		if most := slow.mostOnce.Load(); most != 1 {
			t.Errorf("%d prune passes ran at once, want 1", most)
		}
	})
}
