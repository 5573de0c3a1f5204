// Package relay delivers outbox rows: workers claim due rows through the
// store (SKIP LOCKED claims with a lease), deliver them outside any
// transaction, and complete, retry or dead-letter them, each transition
// fenced by the lease token. Delivery is at-least-once; the sink's
// Idempotency-Key lets a receiver make it exactly-once.
package relay

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
)

// Outbox is what the relay needs of the store.
type Outbox interface {
	Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]store.OutboxRow, error)
	CompleteMany(ctx context.Context, done []store.Completion, now time.Time) ([]int64, error)
	Retry(ctx context.Context, id int64, token string, now, at time.Time, httpStatus int, lastError string) error
	Dead(ctx context.Context, id int64, token string, now time.Time, httpStatus int, lastError string) error
	Snooze(ctx context.Context, id int64, token string, now, at time.Time) error
	ReapExpired(ctx context.Context, now time.Time) (int, error)
}

// Deliverer makes one delivery attempt; sink.HTTP is one.
type Deliverer interface {
	Deliver(ctx context.Context, row store.OutboxRow, now time.Time) sink.Result
}

// Config tunes the relay.
type Config struct {
	Workers     int
	Batch       int // rows claimed at once per worker (default 16)
	MaxAttempts int
	BackoffBase time.Duration
	BackoffMax  time.Duration
	MaxAge      time.Duration
	Lease       time.Duration
	// Idle is how long an idle worker waits before claiming again when no
	// wake-up comes (default 500ms).
	Idle time.Duration
	// BreakerFailures consecutive retryable failures open a sink's breaker
	// (default 5); it half-opens after BreakerTimeout (default 30s).
	BreakerFailures uint32
	BreakerTimeout  time.Duration
}

// Relay delivers the outbox. Run it with Run.
type Relay struct {
	cfg      Config
	ob       Outbox
	sinks    map[string]Deliverer
	breakers map[string]*gobreaker.CircuitBreaker[sink.Result]
	log      *zap.Logger
	m        *metrics.Metrics
	now      func() time.Time
	wake     chan struct{}
}

var errRetryable = errors.New("retryable delivery failure")

// New returns a relay over ob delivering to sinks by name.
func New(cfg Config, ob Outbox, sinks map[string]Deliverer, log *zap.Logger, m *metrics.Metrics) *Relay {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 16
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 25
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = 2 * time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = time.Hour
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 72 * time.Hour
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 500 * time.Millisecond
	}
	if cfg.BreakerFailures == 0 {
		cfg.BreakerFailures = 5
	}
	if cfg.BreakerTimeout <= 0 {
		cfg.BreakerTimeout = 30 * time.Second
	}
	r := &Relay{cfg: cfg, ob: ob, sinks: sinks, breakers: map[string]*gobreaker.CircuitBreaker[sink.Result]{},
		log: log, m: m, now: func() time.Time { return time.Now().UTC() }, wake: make(chan struct{}, 1)}
	for name := range sinks {
		r.breakers[name] = gobreaker.NewCircuitBreaker[sink.Result](gobreaker.Settings{
			Name: name, MaxRequests: 1, Timeout: cfg.BreakerTimeout,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= cfg.BreakerFailures },
			OnStateChange: func(name string, from, to gobreaker.State) {
				m.BreakerState.WithLabelValues(name).Set(float64(map[gobreaker.State]int{
					gobreaker.StateClosed: 0, gobreaker.StateHalfOpen: 1, gobreaker.StateOpen: 2}[to]))
				log.Warn("circuit breaker", zap.String("sink", name), zap.String("from", from.String()), zap.String("to", to.String()))
			},
		})
		m.BreakerState.WithLabelValues(name).Set(0)
	}
	return r
}

// SetClock replaces the clock (tests).
func (r *Relay) SetClock(now func() time.Time) { r.now = now }

// Wake tells idle workers that rows may be due (e.g. an ingest committed).
// It never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run runs the workers and the lease reaper until ctx is cancelled. A
// worker then stops claiming; a delivery in flight finishes (bounded by
// its sink's timeout) and is recorded; rows claimed but not started keep
// their lease until it expires and another relay takes them. Run returns
// nil after a clean stop.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i := 0; i < r.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(r.cfg.Lease/2, time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if n, err := r.ob.ReapExpired(ctx, r.now()); err != nil && ctx.Err() == nil {
					r.log.Warn("reap expired leases", zap.Error(err))
				} else if n > 0 {
					r.log.Info("returned expired leases to pending", zap.Int("rows", n))
				}
			}
		}
	}()
	wg.Wait()
	return nil
}

func (r *Relay) work(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("claim failed", zap.Error(err))
		}
		if n > 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-time.After(r.cfg.Idle):
		}
	}
}

// RunOnce claims one batch of due rows and delivers it; it returns how
// many rows it handled.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	rows, err := r.ob.Claim(ctx, r.now(), nil, r.cfg.Batch, r.cfg.Lease)
	if err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	// Claimed rows are delivered and recorded even if ctx is cancelled
	// now: stopping takes no new work, it does not abandon work in hand.
	work := context.WithoutCancel(ctx)
	// Deliveries of a batch are recorded together: one statement and one
	// commit for the batch instead of one per row. A crash before it means
	// those rows are delivered again, with the same Idempotency-Key.
	var done []store.Completion
	handled := len(rows)
	for i, row := range rows {
		if ctx.Err() != nil {
			// Leave the rest to lease expiry: nothing lost, nothing stuck.
			handled = i
			break
		}
		if c, ok := r.deliver(work, row); ok {
			done = append(done, c)
		}
	}
	r.complete(work, done)
	return handled, nil
}

// complete records delivered rows; a row whose lease was lost is counted,
// and its new holder delivers it again.
func (r *Relay) complete(ctx context.Context, done []store.Completion) {
	if len(done) == 0 {
		return
	}
	lost, err := r.ob.CompleteMany(ctx, done, r.now())
	if err != nil {
		r.log.Error("recording deliveries failed; the rows return after their leases expire", zap.Error(err),
			zap.Int("rows", len(done)))
		return
	}
	for _, id := range lost {
		r.m.LeaseLost.Inc()
		r.log.Warn("lease lost before the delivery was recorded: another relay owns the row", zap.Int64("outbox_id", id))
	}
}

// deliver makes one attempt at row and records a failure at once; a
// success is returned to be recorded with its batch.
func (r *Relay) deliver(ctx context.Context, row store.OutboxRow) (store.Completion, bool) {
	log := r.log.With(zap.Int64("outbox_id", row.ID), zap.String("effect_key", row.EffectKey),
		zap.String("sink", row.Sink), zap.String("correlation_id", row.CorrelationID), zap.Int("attempt", row.Attempts))
	now := r.now()
	s, ok := r.sinks[row.Sink]
	if !ok {
		r.dead(ctx, row, 0, "no sink named "+row.Sink, log)
		return store.Completion{}, false
	}
	if now.Sub(row.CreatedAt) > r.cfg.MaxAge {
		r.dead(ctx, row, row.LastStatus, "max_age exceeded; last error: "+row.LastError, log)
		return store.Completion{}, false
	}
	start := time.Now()
	res, err := r.breakers[row.Sink].Execute(func() (sink.Result, error) {
		res := s.Deliver(ctx, row, now)
		if res.Outcome == sink.Retry {
			return res, errRetryable
		}
		return res, nil
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		// The sink is down: wait without burning an attempt.
		at := now.Add(jitter(r.cfg.BreakerTimeout))
		r.m.Deliveries.WithLabelValues(row.Sink, "snoozed").Inc()
		r.fence(r.ob.Snooze(ctx, row.ID, row.LeaseToken, now, at), log)
		return store.Completion{}, false
	}
	r.m.DeliveryLatency.WithLabelValues(row.Sink).Observe(time.Since(start).Seconds())
	switch res.Outcome {
	case sink.Delivered:
		r.m.Deliveries.WithLabelValues(row.Sink, "delivered").Inc()
		log.Info("delivered", zap.Int("status", res.Status))
		return store.Completion{ID: row.ID, Token: row.LeaseToken, HTTPStatus: res.Status}, true
	case sink.Dead:
		r.dead(ctx, row, res.Status, res.Err, log)
	case sink.Retry:
		if row.Attempts >= r.cfg.MaxAttempts {
			r.dead(ctx, row, res.Status, fmt.Sprintf("max_attempts (%d) exhausted; last error: %s", r.cfg.MaxAttempts, res.Err), log)
			return store.Completion{}, false
		}
		at := now.Add(max(backoff(r.cfg.BackoffBase, r.cfg.BackoffMax, row.Attempts), res.RetryAfter))
		if at.Sub(row.CreatedAt) > r.cfg.MaxAge {
			r.dead(ctx, row, res.Status, "max_age would be exceeded; last error: "+res.Err, log)
			return store.Completion{}, false
		}
		r.m.Deliveries.WithLabelValues(row.Sink, "retry").Inc()
		if r.fence(r.ob.Retry(ctx, row.ID, row.LeaseToken, r.now(), at, res.Status, res.Err), log) {
			log.Info("delivery failed; retrying", zap.Int("status", res.Status), zap.String("error", res.Err),
				zap.Time("next_attempt_at", at))
		}
	}
	return store.Completion{}, false
}

func (r *Relay) dead(ctx context.Context, row store.OutboxRow, status int, msg string, log *zap.Logger) {
	r.m.Deliveries.WithLabelValues(row.Sink, "dead").Inc()
	if r.fence(r.ob.Dead(ctx, row.ID, row.LeaseToken, r.now(), status, msg), log) {
		log.Warn("dead-lettered", zap.Int("status", status), zap.String("error", msg))
	}
}

// fence reports whether a transition took; a lost lease is logged and
// counted, never retried: another relay owns the row now.
func (r *Relay) fence(err error, log *zap.Logger) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrLeaseLost):
		r.m.LeaseLost.Inc()
		log.Warn("lease lost: another relay owns the row")
	default:
		log.Error("outbox update failed; the row returns after its lease expires", zap.Error(err))
	}
	return false
}

// backoff is exponential in the attempts made, capped, with full jitter.
func backoff(base, limit time.Duration, attempts int) time.Duration {
	d := base << min(max(attempts-1, 0), 30)
	if d <= 0 || d > limit {
		d = limit
	}
	return randDuration(d)
}

// jitter returns a duration between d and 2d.
func jitter(d time.Duration) time.Duration { return d + randDuration(d) }

func randDuration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(d)+1))
	if err != nil {
		return d
	}
	return time.Duration(n.Int64())
}
