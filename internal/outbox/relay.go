// Package outbox is the delivery side: the outbox row model and its
// states, the contract a driver keeps them under (Store), the relay and
// the maintenance services (pruning, gauges).
//
// The relay delivers outbox rows: workers claim due rows through the
// store (SKIP LOCKED claims with a lease), deliver them outside any
// transaction, and complete, retry or dead-letter them, each transition
// fenced by the lease token. Delivery is at-least-once; the sink's
// Idempotency-Key lets a receiver make it exactly-once.
package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/ediwatch/ediwatch/internal/backoff"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/sink"
)

// Queue is what the relay needs of the store.
type Queue interface {
	Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]Row, error)
	ExtendLeases(ctx context.Context, held []Held, now time.Time, lease time.Duration) ([]int64, error)
	CompleteMany(ctx context.Context, done []Completion, now time.Time) ([]int64, error)
	Retry(ctx context.Context, id int64, token string, now, at time.Time, f Failure) error
	Dead(ctx context.Context, id int64, token string, now time.Time, f Failure) error
	Snooze(ctx context.Context, id int64, token string, now, at time.Time) error
	GiveBack(ctx context.Context, id int64, token string, now, at time.Time, a *Attempt) error
	ReapExpired(ctx context.Context, now time.Time) (int, error)
	DisableSink(ctx context.Context, sink, reason, by string, now, sent time.Time) (bool, error)
	ParkDisabled(ctx context.Context) (int, error)
}

// Deliverer makes one delivery attempt; sink.HTTP is one.
type Deliverer interface {
	Deliver(ctx context.Context, msg sink.Message, now time.Time) sink.Result
}

// Message is what a sink sends of row. A row is one effect at one sink
// (the outbox is keyed by effect key and sink), so one effect has one
// Idempotency-Key, its effect key, at every sink it is routed to.
func (row Row) Message() sink.Message {
	return sink.Message{EffectKey: row.EffectKey, Kind: row.Kind, CorrelationID: row.CorrelationID,
		Payload: row.Payload, CreatedAt: row.CreatedAt, Attempt: row.Attempts}
}

// RelayConfig tunes the relay.
type RelayConfig struct {
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
	// (default 5); it half-opens after BreakerTimeout (default 30s). A
	// sink's SinkLimits may set its own.
	BreakerFailures uint32
	BreakerTimeout  time.Duration
	// DeadEvents is the sink delivery.dead events go to (the route of
	// KindDeliveryDead), "" for none: each row of another kind that the
	// relay dead-letters gets one, inserted with its Dead transition.
	DeadEvents string
	// Sinks holds per-sink settings by sink name; a sink it lacks, or a
	// zero field, takes the relay-wide breaker settings above and no rate
	// or concurrency limit.
	Sinks map[string]SinkLimits
	// Clock, when set, is the clock every replica shares (the database's):
	// the relay reads its offset from the local clock when Run starts and
	// at every lease reap, and stamps lease expiries (Claim, ExtendLeases)
	// and judges them (ReapExpired) on local time plus that offset. Without
	// it, a replica whose clock runs fast reaps the live leases of the
	// others (and delivers their rows again), and one whose clock runs slow
	// has its own reaped. Due times and ages stay on the local clock, as
	// the ingests that stamp new rows do: a skew moves a retry by as much,
	// it never delays a new row.
	Clock DatabaseClock
	// StoreTimeout bounds each store call of the relay (default: Lease, at
	// least 10s). A connection stranded by a failover (the old primary
	// gone, nothing answering and nothing closing) fails the call then,
	// and the next call gets a new connection.
	StoreTimeout time.Duration
}

// DatabaseClock reads the clock of the store the replicas share.
type DatabaseClock interface {
	// DatabaseNow returns the store's current time. Safe for concurrent use.
	DatabaseNow(ctx context.Context) (time.Time, error)
}

// SinkLimits are one sink's delivery settings. The rate and concurrency
// limits hold within one relay (one process), shared by its workers: N
// replicas together may send N times as much.
type SinkLimits struct {
	// BreakerFailures consecutive retryable failures open the sink's
	// breaker (0: RelayConfig.BreakerFailures).
	BreakerFailures uint32
	// BreakerCooldown is how long the open breaker lets no request
	// through before one trial request (half-open); 0:
	// RelayConfig.BreakerTimeout.
	BreakerCooldown time.Duration
	// RateLimit caps requests per second to the sink (0: no cap): a token
	// bucket with a burst of one, so requests are spaced 1/RateLimit apart
	// and every request spends a token granted before it is sent. A worker
	// waits up to a second for a token; a row whose token is further off
	// is put off until it is due, keeping its token (spent even if the row
	// is claimed again late).
	RateLimit float64
	// Concurrency caps the requests in flight to the sink (0: no cap but
	// Workers).
	Concurrency int
}

// gate is what a request to one sink waits for: a free slot under its
// concurrency and a token of its rate limit. Both are nil when unlimited.
type gate struct {
	cooldown time.Duration
	slots    chan struct{}
	limiter  *rate.Limiter
	mu       sync.Mutex
	// held are the rate-limit tokens reserved for rows put off until
	// their token is due, by outbox id, so a row that comes back uses the
	// token it waited for instead of queueing again.
	held map[int64]heldToken
}

type heldToken struct {
	res *rate.Reservation
	at  time.Time // when the token is due
}

// maxGateWait is the longest a worker waits for a sink's rate-limit token
// with a row in hand; a row whose token is further off is put off until
// then (no attempt counted) and the worker goes on with its batch, so a
// sink with a low rate limit does not hold up the other sinks' rows.
const maxGateWait = time.Second

// token returns how long row must wait for its rate-limit token: the one
// held for it when it was put off, or a new one. When the wait exceeds
// maxGateWait the token stays held for row (put is true); otherwise it is
// row's to use after the wait (cancel gives it back if the wait ends
// early).
func (g *gate) token(id int64) (wait time.Duration, put bool, cancel func()) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.held[id]
	if ok {
		delete(g.held, id)
	} else {
		res := g.limiter.ReserveN(now, 1)
		t = heldToken{res: res, at: now.Add(res.DelayFrom(now))}
	}
	wait = t.at.Sub(now)
	if wait <= maxGateWait {
		return max(wait, 0), false, t.res.Cancel
	}
	// Tokens of rows that never came back (another replica took them) are
	// forgotten once well past due; they were spent unused.
	for k, h := range g.held {
		if now.Sub(h.at) > time.Minute {
			delete(g.held, k)
		}
	}
	g.held[id] = t
	return wait, true, nil
}

// Relay delivers the outbox. Run it with Run.
type Relay struct {
	cfg   RelayConfig
	ob    Queue
	sinks map[string]Deliverer
	// sinkNames are the sinks Claim is limited to: a row for a sink this
	// replica lacks (a rolling config change) waits for a replica that has it.
	sinkNames []string
	breakers  map[string]*gobreaker.CircuitBreaker[sink.Result]
	gates     map[string]*gate
	log       *zap.Logger
	m         *metrics.Metrics
	now       func() time.Time
	// skew is how far cfg.Clock is ahead of now, in nanoseconds (0
	// without a Clock): lease expiries are stamped and judged at now+skew.
	skew atomic.Int64
	wake chan struct{}
	// gone are the sinks this relay saw answer 410 Gone.
	gone goneMarks
}

var (
	errRetryable = errors.New("retryable delivery failure")
	// errNotAdmitted: the row went to a sink whose breaker was open
	// without waiting at its gate, and the breaker half-opened since.
	errNotAdmitted = errors.New("breaker half-opened while the row skipped the sink's gate")
)

// DefaultRelayConfig returns the values NewRelay gives the fields of a
// RelayConfig left zero; the configuration's relay defaults are these.
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{Workers: 8, Batch: 16, MaxAttempts: 25, BackoffBase: 2 * time.Second, BackoffMax: time.Hour,
		MaxAge: 72 * time.Hour, Lease: time.Minute, Idle: 500 * time.Millisecond, BreakerFailures: 5,
		BreakerTimeout: 30 * time.Second}
}

// NewRelay returns a relay over ob delivering to sinks by name.
func NewRelay(cfg RelayConfig, ob Queue, sinks map[string]Deliverer, log *zap.Logger, m *metrics.Metrics) *Relay {
	d := DefaultRelayConfig()
	if cfg.Workers <= 0 {
		cfg.Workers = d.Workers
	}
	if cfg.Batch <= 0 {
		cfg.Batch = d.Batch
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = d.MaxAttempts
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = d.BackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = d.BackoffMax
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = d.MaxAge
	}
	if cfg.Lease <= 0 {
		cfg.Lease = d.Lease
	}
	if cfg.Idle <= 0 {
		cfg.Idle = d.Idle
	}
	if cfg.BreakerFailures == 0 {
		cfg.BreakerFailures = d.BreakerFailures
	}
	if cfg.BreakerTimeout <= 0 {
		cfg.BreakerTimeout = d.BreakerTimeout
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = max(cfg.Lease, 10*time.Second)
	}
	r := &Relay{cfg: cfg, ob: boundedQueue{q: ob, d: cfg.StoreTimeout}, sinks: sinks, breakers: map[string]*gobreaker.CircuitBreaker[sink.Result]{},
		gates: map[string]*gate{}, log: log, m: m, now: func() time.Time { return time.Now().UTC() },
		wake: make(chan struct{}, 1)}
	for name := range sinks {
		r.sinkNames = append(r.sinkNames, name)
		lim := cfg.Sinks[name]
		failures := cmp.Or(lim.BreakerFailures, cfg.BreakerFailures)
		g := &gate{cooldown: cmp.Or(max(lim.BreakerCooldown, 0), cfg.BreakerTimeout)}
		if lim.Concurrency > 0 {
			g.slots = make(chan struct{}, lim.Concurrency)
		}
		if lim.RateLimit > 0 {
			g.limiter = rate.NewLimiter(rate.Limit(lim.RateLimit), 1)
			g.held = map[int64]heldToken{}
		}
		r.gates[name] = g
		r.breakers[name] = gobreaker.NewCircuitBreaker[sink.Result](gobreaker.Settings{
			Name: name, MaxRequests: 1, Timeout: g.cooldown,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
			// A row that never reached the sink is no outcome.
			IsExcluded: func(err error) bool { return errors.Is(err, errNotAdmitted) },
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

// SetClock replaces the clock (tests); with a RelayConfig.Clock, leases
// still go by that clock's offset from it.
func (r *Relay) SetClock(now func() time.Time) { r.now = now }

// leaseSkew is how far the shared clock is ahead of r.now.
func (r *Relay) leaseSkew() time.Duration { return time.Duration(r.skew.Load()) }

// syncClock sets the offset of the shared clock (RelayConfig.Clock) from
// the local one, the round trip's midpoint taken as the moment it was
// read. On an error the last offset is kept.
func (r *Relay) syncClock(ctx context.Context) {
	if r.cfg.Clock == nil {
		return
	}
	before := r.now()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StoreTimeout)
	defer cancel()
	shared, err := r.cfg.Clock.DatabaseNow(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reading the database clock failed; the last offset is kept", zap.Error(err))
		}
		return
	}
	after := r.now()
	off := shared.Sub(before.Add(after.Sub(before) / 2))
	if old := time.Duration(r.skew.Swap(int64(off))); (off - old).Abs() > time.Second {
		r.log.Info("leases follow the database clock", zap.Duration("ahead_of_local", off))
	}
}

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
// its sink's timeout) and is recorded; rows claimed but not started are
// given back at once, due now, without an attempt counted. Run returns
// nil after a clean stop.
func (r *Relay) Run(ctx context.Context) error {
	r.syncClock(ctx)
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
				r.syncClock(ctx)
				if n, err := r.ob.ReapExpired(ctx, r.now().Add(r.leaseSkew())); err != nil && ctx.Err() == nil {
					r.log.Warn("reap expired leases", zap.Error(err))
				} else if n > 0 {
					r.log.Info("returned expired leases to pending", zap.Int("rows", n))
				}
				r.parkDisabled(ctx)
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

// RunOnce claims one batch of due rows of the relay's sinks and delivers
// it; it returns how many rows it handled.
//
// While the batch is in flight a ticker at a third of the lease records
// the deliveries made so far and extends the lease of every row still
// held, so no lease lapses under a slow receiver. A row whose lease was
// lost (or may have lapsed: the last extension failed) is not delivered;
// nor is a row whose sink and ordering key had an earlier row in the batch
// that was not delivered.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	if len(r.sinkNames) == 0 {
		return 0, nil // an empty filter would claim every sink's rows
	}
	if ctx.Err() != nil {
		return 0, nil
	}
	claimed := r.now()
	// The lease is stamped to expire cfg.Lease after now on the shared
	// clock; b.expires below is the same moment on this relay's.
	//
	// A stop does not cut the claim short (it is bounded by StoreTimeout):
	// a cancellation that lands once the database committed would leave
	// the rows claimed and unknown here, inflight until their leases
	// lapse. The rows it returns are given back below.
	rows, err := r.ob.Claim(context.WithoutCancel(ctx), claimed, r.sinkNames, r.cfg.Batch, r.cfg.Lease+r.leaseSkew())
	if err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	// Claimed rows are delivered and recorded even if ctx is cancelled
	// now: stopping takes no new work, it does not abandon work in hand.
	work := context.WithoutCancel(ctx)
	b := newBatch(rows, claimed.Add(r.cfg.Lease))
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(max(r.cfg.Lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.flush(work, b)
				r.extend(work, b)
			}
		}
	}()
	handled := len(rows)
	for i, row := range rows {
		if ctx.Err() != nil {
			// Stopping: give the rest back at once, nothing lost, nothing stuck.
			handled = i
			for _, rest := range rows[i:] {
				r.release(work, b, rest, "stopping")
			}
			break
		}
		if why := b.skip(row, r.now()); why != "" {
			r.release(work, b, row, why)
			continue
		}
		delivered := r.deliver(work, ctx, row, b)
		if !delivered {
			b.block(row)
		}
	}
	close(stop)
	<-renewed
	r.flushLast(work, ctx, b)
	return handled, nil
}

// batch is the state of one claimed batch, shared by the delivering
// goroutine and the lease ticker.
type batch struct {
	mu      sync.Mutex
	held    map[int64]string // id -> lease token of rows not finished
	lost    map[int64]bool
	blocked map[string]bool // sink + ordering key with an undelivered row
	done    []Completion
	expires time.Time // the earliest the leases may lapse
}

func newBatch(rows []Row, expires time.Time) *batch {
	b := &batch{held: map[int64]string{}, lost: map[int64]bool{}, blocked: map[string]bool{}, expires: expires}
	for _, row := range rows {
		b.held[row.ID] = row.LeaseToken
	}
	return b
}

func orderKey(row Row) string { return row.Sink + "\x1f" + row.OrderingKey }

// skip says why row must not be delivered now, or "".
func (b *batch) skip(row Row, now time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.lost[row.ID]:
		return "lease lost"
	case !now.Before(b.expires):
		return "lease may have lapsed"
	case b.blocked[orderKey(row)]:
		return "an earlier row of its ordering key was not delivered"
	}
	return ""
}

func (b *batch) block(row Row) {
	b.mu.Lock()
	b.blocked[orderKey(row)] = true
	b.mu.Unlock()
}

// finish drops row from the rows whose lease the ticker extends; a
// delivered row waits in done to be recorded.
func (b *batch) finish(row Row, c *Completion) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, row.ID)
	if c != nil {
		b.done = append(b.done, *c)
	}
}

// flush records the deliveries made so far; a row whose lease was lost is
// counted, and its new holder delivers it again. Deliveries the store
// fails to record stay in the batch for the next flush (the lease ticker's
// or the batch's last), and flush reports false.
func (r *Relay) flush(ctx context.Context, b *batch) bool {
	b.mu.Lock()
	done := b.done
	b.done = nil
	b.mu.Unlock()
	if len(done) == 0 {
		return true
	}
	lost, err := r.ob.CompleteMany(ctx, done, r.now())
	if err != nil {
		b.mu.Lock()
		b.done = append(done, b.done...)
		b.mu.Unlock()
		r.log.Warn("recording deliveries failed; trying again while their leases hold", zap.Error(err),
			zap.Int("rows", len(done)))
		return false
	}
	for _, id := range lost {
		r.m.LeaseLost.Inc()
		r.log.Warn("lease lost before the delivery was recorded: another relay owns the row", zap.Int64("outbox_id", id))
	}
	return true
}

// flushLast records the batch's last deliveries. A store that cannot
// record them (restarting, failing over) is tried again, with backoff,
// while their leases may hold and the relay is not stopping, so a
// delivery made during a store outage is not posted a second time when
// its lease lapses.
func (r *Relay) flushLast(work, stop context.Context, b *batch) {
	start := time.Now()
	for wait := 50 * time.Millisecond; !r.flush(work, b); wait = min(2*wait, 2*time.Second) {
		b.mu.Lock()
		rows := len(b.done)
		lapse := !r.now().Add(wait).Before(b.expires)
		b.mu.Unlock()
		if lapse || stop.Err() != nil || time.Since(start)+wait >= r.cfg.Lease {
			r.log.Error("recording deliveries failed; the rows return after their leases expire",
				zap.Int("rows", rows))
			return
		}
		select {
		case <-stop.Done():
		case <-time.After(wait):
		}
	}
}

// extend moves the lease of every row the batch still holds.
func (r *Relay) extend(ctx context.Context, b *batch) {
	b.mu.Lock()
	held := make([]Held, 0, len(b.held))
	for id, token := range b.held {
		held = append(held, Held{ID: id, Token: token})
	}
	b.mu.Unlock()
	if len(held) == 0 {
		return
	}
	now := r.now()
	lost, err := r.ob.ExtendLeases(ctx, held, now, r.cfg.Lease+r.leaseSkew())
	if err != nil {
		r.log.Warn("extending leases failed", zap.Error(err), zap.Int("rows", len(held)))
		return
	}
	b.mu.Lock()
	b.expires = now.Add(r.cfg.Lease)
	var really []int64
	for _, id := range lost {
		// A row finished meanwhile was not lost: its transition took.
		if _, ok := b.held[id]; ok {
			b.lost[id] = true
			really = append(really, id)
		}
	}
	b.mu.Unlock()
	for _, id := range really {
		r.m.LeaseLost.Inc()
		r.log.Warn("lease lost while the batch was in flight: another relay owns the row", zap.Int64("outbox_id", id))
	}
}

// release gives a claimed row back without an attempt counted: due now,
// for the next claimer (this relay or another) to take in order.
func (r *Relay) release(ctx context.Context, b *batch, row Row, why string) {
	b.finish(row, nil)
	b.block(row)
	b.mu.Lock()
	lost := b.lost[row.ID]
	b.mu.Unlock()
	if lost {
		return
	}
	log := r.rowLog(row)
	if r.fence(r.ob.Snooze(ctx, row.ID, row.LeaseToken, r.now(), r.now()), log) {
		log.Info("row given back undelivered", zap.String("reason", why))
	}
}

// rowLog returns a logger naming row without patient data: the outbox id,
// kind and sink, and the effect key only where it names no patient.
func (r *Relay) rowLog(row Row) *zap.Logger {
	return r.log.With(zap.Int64("outbox_id", row.ID), zap.String("kind", row.Kind),
		zap.String("effect", sink.LogKey(row.Kind, row.EffectKey)), zap.String("sink", row.Sink),
		zap.String("correlation_id", row.CorrelationID), zap.Int("attempt", row.Attempts))
}

// deliver makes one attempt at row and records a failure at once; a
// success is left in the batch to be recorded by the next flush. It
// reports whether row was delivered. Waiting at the sink's gate (its
// concurrency and rate limit) ends when stop does, and the row is then
// given back.
func (r *Relay) deliver(ctx, stop context.Context, row Row, b *batch) bool {
	log := r.rowLog(row)
	now := r.now()
	s, ok := r.sinks[row.Sink]
	if !ok {
		// Claim takes only rows of this relay's sinks; this is a guard.
		r.release(ctx, b, row, "no sink named "+row.Sink)
		return false
	}
	if r.gone.since(row.Sink, row.UpdatedAt) {
		// Claimed (updated_at is the claim time) before its sink answered
		// 410 here; later claims leave the disabled sink's rows out.
		r.release(ctx, b, row, "its sink answered 410 Gone")
		return false
	}
	ageFrom := row.AgeFrom
	if ageFrom.IsZero() {
		ageFrom = row.CreatedAt
	}
	if now.Sub(ageFrom) > r.cfg.MaxAge {
		b.finish(row, nil)
		r.dead(ctx, row, Failure{HTTPStatus: row.LastStatus, Error: "max_age exceeded; last error: " + row.LastError,
			Response: row.LastResponse}, "max_age", log)
		return false
	}
	if row.PayloadErr != "" {
		// Nothing sent: what would be sent cannot be read back.
		b.finish(row, nil)
		r.dead(ctx, row, Failure{Error: row.PayloadErr}, "unreadable", log)
		return false
	}
	admitted, putOff, leave, err := r.admit(stop, row)
	if err != nil {
		r.release(ctx, b, row, "stopping")
		return false
	}
	if putOff > 0 {
		// Its rate-limit token is far off: the row waits in the store
		// instead of holding this worker; later rows of its ordering key
		// in the batch wait with it.
		if why := b.skip(row, r.now()); why != "" {
			r.release(ctx, b, row, why)
			return false
		}
		b.finish(row, nil)
		r.m.Deliveries.WithLabelValues(row.Sink, "snoozed").Inc()
		at := r.now()
		if r.fence(r.ob.Snooze(ctx, row.ID, row.LeaseToken, at, at.Add(putOff)), log) {
			log.Debug("put off until its rate-limit token is due", zap.Duration("for", putOff))
		}
		return false
	}
	if admitted {
		// The wait may have been long: the lease ticker went on extending
		// the row's lease, but it may have been lost meanwhile.
		if why := b.skip(row, r.now()); why != "" {
			leave()
			r.release(ctx, b, row, why)
			return false
		}
		now = r.now()
	}
	// trial: the request probes a sink whose breaker opened (half-open:
	// one request at a time, the rest snoozed). A failed trial says the
	// sink is still down, not that the row fails: it does not spend the
	// row's max_attempts, so an outage longer than the backoff's reach
	// (a weekend) ends the row by max_age, not by attempts that all
	// met a down receiver.
	trial := false
	start := time.Now()
	res, err := r.breakers[row.Sink].Execute(func() (sink.Result, error) {
		if !admitted {
			return sink.Result{}, errNotAdmitted
		}
		// Read inside the breaker's admission: half-open lets one
		// request through at a time, so this one is the trial.
		trial = r.breakers[row.Sink].State() == gobreaker.StateHalfOpen
		res := s.Deliver(ctx, row.Message(), now)
		if res.Outcome == sink.Retry {
			return res, errRetryable
		}
		return res, nil
	})
	leave()
	// The row leaves the ticker's care before its transition is recorded,
	// so a transition is never mistaken for a lost lease.
	if res.Outcome != sink.Delivered || err != nil {
		b.finish(row, nil)
	}
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) || errors.Is(err, errNotAdmitted) {
		// The sink is down: wait without burning an attempt.
		cooldown := r.gates[row.Sink].cooldown
		at := now.Add(backoff.Between(cooldown, 2*cooldown))
		r.m.Deliveries.WithLabelValues(row.Sink, "snoozed").Inc()
		r.fence(r.ob.Snooze(ctx, row.ID, row.LeaseToken, now, at), log)
		return false
	}
	latency := time.Since(start)
	r.m.DeliveryLatency.WithLabelValues(row.Sink).Observe(latency.Seconds())
	att := attemptOf(res, now, latency)
	r.m.DeliveryAttempts.WithLabelValues(row.Sink, att.Class).Inc()
	fail := Failure{HTTPStatus: res.Status, Error: res.Err, Response: res.Response, Attempt: att}
	switch res.Outcome {
	case sink.Delivered:
		r.m.Deliveries.WithLabelValues(row.Sink, "delivered").Inc()
		log.Info("delivered", zap.Int("status", res.Status))
		b.finish(row, &Completion{ID: row.ID, Token: row.LeaseToken, HTTPStatus: res.Status, Attempt: att})
		return true
	case sink.Dead:
		r.dead(ctx, row, fail, "rejected", log)
	case sink.Gone:
		r.sinkGone(ctx, row, res, att, log)
	case sink.Retry:
		if row.Attempts >= r.cfg.MaxAttempts && !trial {
			fail.Error = fmt.Sprintf("max_attempts (%d) exhausted; last error: %s", r.cfg.MaxAttempts, res.Err)
			r.dead(ctx, row, fail, "max_attempts", log)
			return false
		}
		at := now.Add(max(backoff.Full(r.cfg.BackoffBase, r.cfg.BackoffMax, row.Attempts), res.RetryAfter))
		if at.Sub(ageFrom) > r.cfg.MaxAge {
			fail.Error = "max_age would be exceeded; last error: " + res.Err
			r.dead(ctx, row, fail, "max_age", log)
			return false
		}
		r.m.Deliveries.WithLabelValues(row.Sink, "retry").Inc()
		if r.fence(r.ob.Retry(ctx, row.ID, row.LeaseToken, r.now(), at, fail), log) {
			log.Info("delivery failed; retrying", zap.Int("status", res.Status), zap.String("error", res.Err),
				zap.Time("next_attempt_at", at))
		}
	}
	return false
}

// admit waits at the gate of row's sink: for a free slot under its
// concurrency, then for a token of its rate limit. Waiting is neither an
// attempt nor a failure: the breaker never sees it, and the batch's lease
// ticker goes on extending the row's lease. Rows wait in batch order, so
// ordering keys keep their order. A token more than maxGateWait off is
// held for the row, which is put off until then (putOff > 0, no slot
// held). A sink whose breaker is open is not waited for (admitted is
// false): its row is snoozed without a request, so neither a slot nor a
// token is spent on it. err is stop's error when the relay stops while
// the row waits; leave frees the slot.
func (r *Relay) admit(stop context.Context, row Row) (admitted bool, putOff time.Duration, leave func(), err error) {
	g := r.gates[row.Sink]
	leave = func() {}
	if r.breakers[row.Sink].State() == gobreaker.StateOpen {
		return false, 0, leave, nil
	}
	if g.slots != nil {
		select {
		case g.slots <- struct{}{}:
			leave = func() { <-g.slots }
		case <-stop.Done():
			return false, 0, nil, stop.Err()
		}
	}
	if g.limiter != nil {
		wait, put, cancel := g.token(row.ID)
		if put {
			leave()
			return false, wait, func() {}, nil
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-stop.Done():
				cancel()
				leave()
				return false, 0, nil, stop.Err()
			}
		}
	}
	return true, 0, leave, nil
}

// attemptOf is the attempt history entry of a request made at now.
func attemptOf(res sink.Result, now time.Time, latency time.Duration) *Attempt {
	a := &Attempt{At: now, Latency: latency, HTTPStatus: res.Status, Error: res.Err, ResponseSize: res.ResponseSize,
		Response: res.Response}
	switch {
	case res.Status != 0:
		a.Class = StatusClass(res.Status)
	case res.Timeout:
		a.Class = ClassTimeout
	case res.Outcome == sink.Dead:
		a.Class = ClassUnsent // no request: its body could not be built
	default:
		a.Class = ClassNetwork
	}
	return a
}

// dead dead-letters row for reason (rejected, max_attempts, max_age,
// unreadable),
// with its delivery.dead event when those are routed.
func (r *Relay) dead(ctx context.Context, row Row, f Failure, reason string, log *zap.Logger) {
	r.m.Deliveries.WithLabelValues(row.Sink, "dead").Inc()
	now := r.now()
	if r.cfg.DeadEvents != "" && row.Kind != KindDeliveryDead {
		f.DeadEvent = &DeadEvent{Sink: r.cfg.DeadEvents, Payload: deadPayload(row, f, reason, now)}
	}
	if r.fence(r.ob.Dead(ctx, row.ID, row.LeaseToken, now, f), log) {
		log.Warn("dead-lettered", zap.Int("status", f.HTTPStatus), zap.String("error", f.Error), zap.String("reason", reason))
		if f.DeadEvent != nil {
			r.Wake()
		}
	}
}

// deadPayload is the data of a delivery.dead event: what identifies the
// dead row and why it died, never its payload or the receiver's response;
// the effect key is digested where it may name a patient (sink.LogKey).
func deadPayload(row Row, f Failure, reason string, at time.Time) json.RawMessage {
	class := ""
	if f.Attempt != nil {
		class = f.Attempt.Class
	} else if f.HTTPStatus != 0 {
		class = StatusClass(f.HTTPStatus)
	}
	b, _ := json.Marshal(struct {
		OutboxID   int64  `json:"outbox_id"`
		Sink       string `json:"sink"`
		Kind       string `json:"kind"`
		EffectKey  string `json:"effect_key"`
		Reason     string `json:"reason"`
		HTTPStatus int    `json:"http_status"`
		ErrorClass string `json:"error_class"`
		Error      string `json:"error"`
		Attempts   int    `json:"attempts"`
		DeadAt     string `json:"dead_at"`
	}{row.ID, row.Sink, row.Kind, sink.LogKey(row.Kind, row.EffectKey), reason, f.HTTPStatus, class, f.Error,
		row.Attempts, at.UTC().Format(time.RFC3339Nano)})
	return b
}

// fence reports whether a transition took; a lost lease is logged and
// counted, never retried: another relay owns the row now.
func (r *Relay) fence(err error, log *zap.Logger) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrLeaseLost):
		r.m.LeaseLost.Inc()
		log.Warn("lease lost: another relay owns the row")
	default:
		log.Error("outbox update failed; the row returns after its lease expires", zap.Error(err))
	}
	return false
}

// boundedQueue bounds every call to q by d.
type boundedQueue struct {
	q Queue
	d time.Duration
}

func (b boundedQueue) Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]Row, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.Claim(ctx, now, sinks, limit, lease)
}

func (b boundedQueue) ExtendLeases(ctx context.Context, held []Held, now time.Time, lease time.Duration) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.ExtendLeases(ctx, held, now, lease)
}

func (b boundedQueue) CompleteMany(ctx context.Context, done []Completion, now time.Time) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.CompleteMany(ctx, done, now)
}

func (b boundedQueue) Retry(ctx context.Context, id int64, token string, now, at time.Time, f Failure) error {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.Retry(ctx, id, token, now, at, f)
}

func (b boundedQueue) Dead(ctx context.Context, id int64, token string, now time.Time, f Failure) error {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.Dead(ctx, id, token, now, f)
}

func (b boundedQueue) Snooze(ctx context.Context, id int64, token string, now, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.Snooze(ctx, id, token, now, at)
}

func (b boundedQueue) GiveBack(ctx context.Context, id int64, token string, now, at time.Time, a *Attempt) error {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.GiveBack(ctx, id, token, now, at, a)
}

func (b boundedQueue) ReapExpired(ctx context.Context, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.ReapExpired(ctx, now)
}

func (b boundedQueue) DisableSink(ctx context.Context, sink, reason, by string, now, sent time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.DisableSink(ctx, sink, reason, by, now, sent)
}

func (b boundedQueue) ParkDisabled(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.q.ParkDisabled(ctx)
}
