package outbox

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/backoff"
	"github.com/ediwatch/ediwatch/internal/sink"
)

// GoneReason is the reason recorded when a receiver's 410 disables a sink.
const GoneReason = "HTTP 410 Gone"

// SinkState is whether a sink is disabled, as the store records it. A
// sink the store holds no state for is enabled.
type SinkState struct {
	Sink     string
	Disabled bool
	// Since is when the sink was last disabled or enabled.
	Since time.Time
	// Reason says why it is disabled ("HTTP 410 Gone", an operator's
	// words); empty once enabled.
	Reason string
	// By says who disabled it: "relay" for a 410, else the operator.
	By string
}

// SinkStates records which sinks are disabled. A disabled sink's rows are
// never claimed, by any replica (Claim leaves them out in the same
// statement that leases rows, so a disable is seen by every claim that
// starts after it commits); they stay pending, attempts and age budget
// untouched, until the sink is enabled. Rows claimed before the disable
// committed may still be attempted once.
type SinkStates interface {
	// DisableSink disables sink at now, recording reason and by. The
	// sink's pending rows are parked (next attempt far in the future, so
	// claims do not walk past them). It reports whether the sink was
	// enabled before; disabling a disabled sink changes nothing, so the
	// first reason and time are kept. sent is when the request the
	// disable answers was sent (a 410's; an operator's now): a sink
	// enabled after it stays enabled (changed is false), since the
	// receiver may have come back in between and the enable is newer
	// news. Safe to call from any replica at once.
	DisableSink(ctx context.Context, sink, reason, by string, now, sent time.Time) (changed bool, err error)
	// EnableSink enables sink at now: its pending rows are due at now,
	// with a fresh age budget (AgeFrom = now, as a replay gives: time spent
	// disabled does not count against relay.max_age); their attempts are
	// kept. Where the store can, idle relays are woken. It reports whether
	// the sink was disabled; enabling an enabled sink changes nothing.
	EnableSink(ctx context.Context, sink string, now time.Time) (changed bool, err error)
	// SinkStates returns every sink the store holds a state for, by name.
	SinkStates(ctx context.Context) ([]SinkState, error)
	// ParkDisabled parks the pending rows of disabled sinks that are not
	// parked yet (rows that arrived, or were given back, after the
	// disable), so claims do not walk past them; it returns how many. It
	// takes turns with EnableSink, so a row an enable made due is never
	// parked again. The relays call it with their lease reaper.
	ParkDisabled(ctx context.Context) (int, error)
}

// goneMarks are the sinks this relay saw answer 410, and when: a row
// claimed before then (its claim may have preceded the disable) is given
// back, not sent, so no further request of this process reaches the sink.
type goneMarks struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (g *goneMarks) mark(name string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at == nil {
		g.at = map[string]time.Time{}
	}
	g.at[name] = at
}

// since reports whether name answered 410 at or after claimed.
func (g *goneMarks) since(name string, claimed time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.at[name]
	return ok && !at.Before(claimed)
}

// sinkGone handles a 410 Gone: it disables row's sink in the store (so
// every replica, and this one after a restart, stops claiming its rows)
// and gives row back pending without an attempt counted, to wait for
// `ediwatch sink enable`. If the store cannot record the disable, the row
// waits a backoff (still no attempt counted) and its next 410 tries again.
// A 410 to a request sent before the sink was last enabled leaves it
// enabled (the enable is newer news) and the row is tried again after a
// short backoff. The request is in the row's history (att), numbered as
// claimed.
func (r *Relay) sinkGone(ctx context.Context, row Row, res sink.Result, att *Attempt, log *zap.Logger) {
	r.m.Deliveries.WithLabelValues(row.Sink, "gone").Inc()
	now := r.now()
	r.gone.mark(row.Sink, now)
	changed, err := r.ob.DisableSink(ctx, row.Sink, GoneReason, "relay", now, att.At)
	at := now
	switch {
	case err != nil:
		at = now.Add(backoff.Full(r.cfg.BackoffBase, r.cfg.BackoffMax, row.Attempts))
		log.Error("the receiver answered 410 Gone but disabling the sink failed; the row waits", zap.Error(err),
			zap.Time("next_attempt_at", at))
	case changed:
		log.Warn("sink disabled: the receiver answered 410 Gone; its rows wait for `ediwatch sink enable`",
			zap.Int("status", res.Status))
	default:
		// Disabled already, or enabled after this request was sent: the
		// enable is newer than this 410, and the row is tried again.
		// Not due at once: with clocks apart, an enable stamped ahead of
		// this relay's clock would otherwise have it hammer the receiver.
		at = now.Add(backoff.Between(r.cfg.BackoffBase, 2*r.cfg.BackoffBase))
		log.Info("the receiver answered 410 Gone; the sink was already disabled, or enabled since the request was sent",
			zap.Int("status", res.Status), zap.Time("next_attempt_at", at))
	}
	if changed {
		r.m.SinkDisabled.WithLabelValues(row.Sink).Set(1)
	}
	att.Number = row.Attempts
	r.fence(r.ob.GiveBack(ctx, row.ID, row.LeaseToken, now, at, att), log)
}

// parkDisabled parks what arrived for disabled sinks since the last call.
func (r *Relay) parkDisabled(ctx context.Context) {
	if n, err := r.ob.ParkDisabled(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("parking the rows of disabled sinks", zap.Error(err))
	} else if n > 0 {
		r.log.Debug("parked rows of disabled sinks", zap.Int("rows", n))
	}
}
