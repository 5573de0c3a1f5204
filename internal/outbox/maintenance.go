package outbox

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
)

// MaintenanceLease is the lease that makes one replica the maintenance
// leader.
const MaintenanceLease = "maintenance"

// PruneStore is what the pruner needs of the store.
type PruneStore interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (int64, bool, error)
	ReleaseLease(ctx context.Context, name, holder string, token int64) error
	Prune(ctx context.Context, keysBefore time.Time, batch int) (int, error)
	PrunePayloads(ctx context.Context, before time.Time, batch int) (int, error)
}

// Pruner deletes what retention allows, once an hour, on one replica at a
// time: the holder of the maintenance lease, which it renews every Renew
// and which lapses 5×Renew after its holder stops renewing, so a replica
// that was killed is replaced within minutes; one that stops gives the
// lease up at once. Run it with Run.
type Pruner struct {
	Store PruneStore
	// Keys is how long keys are kept (retention.keys).
	Keys time.Duration
	// Payloads is how long a delivered row keeps its payload
	// (retention.payloads); 0 keeps it as long as the row.
	Payloads time.Duration
	// Fold, when set, folds the reconciliation rollups of the days that
	// have closed (reconcile.FoldClosed) once a pass, after pruning, and
	// returns how many it folded.
	Fold func(ctx context.Context, at time.Time) (int, error)
	// Holder names this replica to the lease.
	Holder string
	Log    *zap.Logger
	// Now is the clock (default time.Now, in UTC).
	Now func() time.Time
	// Every is the time between passes (default an hour); Renew the time
	// between renewals of the lease, and the delay of the first (default
	// a minute).
	Every, Renew time.Duration
}

// Run takes or renews the maintenance lease every Renew, prunes once it
// has held the lease for an Every since its last pass (at once when it
// has just taken the lease), and gives the lease up when ctx is cancelled.
func (p *Pruner) Run(ctx context.Context) error {
	now := p.Now
	if now == nil {
		now = func() time.Time { return time.Now().UTC() }
	}
	every, renew := p.Every, p.Renew
	if every <= 0 {
		every = time.Hour
	}
	if renew <= 0 {
		renew = time.Minute
	}
	var (
		token    int64 // the lease's token while held, else 0
		lastPass time.Time
	)
	defer func() {
		if token == 0 {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := p.Store.ReleaseLease(rctx, MaintenanceLease, p.Holder, token); err != nil {
			p.Log.Warn("the maintenance lease could not be given up; it lapses by itself", zap.Error(err))
		}
	}()
	t := time.NewTicker(renew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		at := now()
		tok, ok, err := p.Store.AcquireLease(ctx, MaintenanceLease, p.Holder, 5*renew, at)
		if err != nil {
			// The store is unreachable: the lease may still be ours, and
			// the next renewal tells (the same token: no new pass).
			if ctx.Err() == nil {
				p.Log.Warn("maintenance lease failed", zap.Error(err))
			}
			continue
		}
		if !ok {
			token = 0 // another replica's
			continue
		}
		if tok != token {
			token, lastPass = tok, time.Time{} // newly taken: prune now
		}
		if lastPass.IsZero() || at.Sub(lastPass) >= every {
			if !p.passHolding(ctx, at, renew, now) {
				token = 0
			}
			lastPass = at
		}
	}
}

// passHolding runs Pass at at while renewing the lease every renew, so a
// pass longer than the lease's TTL does not let another replica prune
// beside it; a renewal that finds the lease taken stops the pass. It
// reports whether the lease was held throughout.
func (p *Pruner) passHolding(ctx context.Context, at time.Time, renew time.Duration, now func() time.Time) bool {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var lost atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(renew)
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
			}
			if _, ok, err := p.Store.AcquireLease(pctx, MaintenanceLease, p.Holder, 5*renew, now()); err == nil && !ok {
				lost.Store(true)
				stop()
				return
			}
		}
	}()
	p.Pass(pctx, at)
	stop()
	<-done
	return !lost.Load()
}

// Pass prunes once what retention allows at at: rows past retention.keys,
// then payloads past retention.payloads, then folds the closed days (each
// whether or not the others failed). The caller holds the maintenance
// lease.
func (p *Pruner) Pass(ctx context.Context, at time.Time) {
	p.prune(ctx, at)
	if p.Fold == nil {
		return
	}
	if n, err := p.Fold(ctx, at); err != nil {
		if ctx.Err() == nil {
			p.Log.Warn("folding the reconciliation of closed days failed", zap.Error(err))
		}
	} else if n > 0 {
		p.Log.Info("folded the reconciliation of closed days", zap.Int("days", n))
	}
}

// prune deletes what retention allows at at.
func (p *Pruner) prune(ctx context.Context, at time.Time) {
	if n, err := p.Store.Prune(ctx, at.Add(-p.Keys), 1000); err != nil {
		if ctx.Err() == nil {
			p.Log.Warn("retention prune failed", zap.Error(err))
		}
	} else if n > 0 {
		p.Log.Info("retention pruned rows", zap.Int("rows", n))
	}
	if p.Payloads <= 0 {
		return
	}
	if n, err := p.Store.PrunePayloads(ctx, at.Add(-p.Payloads), 1000); err != nil {
		if ctx.Err() == nil {
			p.Log.Warn("retention prune of delivered payloads failed", zap.Error(err))
		}
	} else if n > 0 {
		p.Log.Info("retention pruned delivered payloads", zap.Int("rows", n))
	}
}

// StatsStore is what the gauges need of the store.
type StatsStore interface {
	Stats(ctx context.Context, now time.Time) ([]SinkStats, error)
}

// Gauges sets the outbox gauges from the store every interval, and the
// reconciliation divergence every 20 intervals. Run it with Run.
type Gauges struct {
	Store StatsStore
	// Divergent reports whether reconciliation at now finds a divergence.
	Divergent func(ctx context.Context, now time.Time) (bool, error)
	// States, when set, gives ediwatch_sink_disabled the store's view, so
	// every replica exports what any of them (or an operator) decided.
	States interface {
		SinkStates(ctx context.Context) ([]SinkState, error)
	}
	Metrics *metrics.Metrics
	// Log is told when the store cannot be read.
	Log   *zap.Logger
	Every time.Duration
	// Timeout, when set, bounds each setting of the gauges: a store slow
	// to answer leaves them as they were until the next.
	Timeout time.Duration
	// Now is the clock (default time.Now, in UTC).
	Now func() time.Time
}

// Run sets the gauges until ctx is cancelled.
func (g *Gauges) Run(ctx context.Context) error {
	now := g.Now
	if now == nil {
		now = func() time.Time { return time.Now().UTC() }
	}
	var seen map[string]bool // the sinks the last stats had
	for i := 0; ; i++ {
		seen = g.set(ctx, i, now, seen)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(g.Every):
		}
	}
}

// set sets the gauges once, the i-th time, and returns the sinks the
// stats had.
func (g *Gauges) set(parent context.Context, i int, now func() time.Time, seen map[string]bool) map[string]bool {
	ctx := parent
	if g.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, g.Timeout)
		defer cancel()
	}
	m := g.Metrics
	if i%20 == 0 {
		if div, err := g.Divergent(ctx, now()); err == nil {
			m.Divergence.Set(map[bool]float64{false: 0, true: 1}[div])
		} else if parent.Err() == nil {
			g.Log.Warn("reconciliation for the divergence gauge failed", zap.Error(err))
		}
	}
	stats, err := g.Store.Stats(ctx, now())
	if err != nil {
		if parent.Err() == nil {
			g.Log.Warn("outbox stats for the gauges failed", zap.Error(err))
		}
		g.setSinkDisabled(ctx)
		return seen
	}
	// A sink with no live row is not in stats: its gauges fall to 0.
	live := map[string]bool{}
	for _, s := range stats {
		live[s.Sink] = true
		m.OutboxPending.WithLabelValues(s.Sink).Set(float64(s.Pending + s.Inflight))
		m.OutboxDead.WithLabelValues(s.Sink).Set(float64(s.Dead))
		m.OutboxOldestPending.WithLabelValues(s.Sink).Set(s.OldestPending.Seconds())
	}
	for sink := range seen {
		if !live[sink] {
			m.OutboxPending.WithLabelValues(sink).Set(0)
			m.OutboxDead.WithLabelValues(sink).Set(0)
			m.OutboxOldestPending.WithLabelValues(sink).Set(0)
		}
	}
	g.setSinkDisabled(ctx)
	return live
}

// setSinkDisabled sets ediwatch_sink_disabled from the store's sink
// states; a sink the store holds no state for keeps its value (0 from
// metrics.Init).
func (g *Gauges) setSinkDisabled(ctx context.Context) {
	if g.States == nil {
		return
	}
	states, err := g.States.SinkStates(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.Log.Warn("sink states for the gauges failed", zap.Error(err))
		}
		return
	}
	for _, s := range states {
		g.Metrics.SinkDisabled.WithLabelValues(s.Sink).Set(map[bool]float64{false: 0, true: 1}[s.Disabled])
	}
}
