package poller

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
)

// Silence is the silence alarm: a payer that stops sending is a failure
// nothing else sees. For every source it sets the time of the source's
// last new file (from the shared ledger, so every replica agrees, whichever
// holds the source's lease) and whether the source is overdue: no new file
// for longer than its expect_every, counted from its last file, or from
// the watch's start for a source that never sent one (so a new deployment
// does not alarm at once).
type Silence struct {
	Store interface {
		LastFileTimes(ctx context.Context) (map[string]time.Time, error)
	}
	Metrics *metrics.Metrics
	// Expect maps every source to its expect_every; 0 never alarms.
	Expect map[string]time.Duration
	// Started is when the watch began (default: the first Check).
	Started time.Time
	// Every, when positive, overrides Interval's choice.
	Every time.Duration
	Log   *zap.Logger
	// Now is the clock (default time.Now, in UTC).
	Now func() time.Time

	// last is the ledger's last good reading: while the store cannot be
	// read, the clock still runs on it, so an outage does not freeze a
	// source at not overdue.
	last map[string]time.Time
}

// Check reads the ledger once and sets the gauges.
func (w *Silence) Check(ctx context.Context) error {
	now := time.Now().UTC()
	if w.Now != nil {
		now = w.Now()
	}
	if w.Started.IsZero() {
		w.Started = now
	}
	last, err := w.Store.LastFileTimes(ctx)
	if err != nil {
		last = w.last
	} else {
		w.last = last
	}
	for source, expect := range w.Expect {
		at, ok := last[source]
		since := w.Started
		if ok {
			w.Metrics.SourceLastFile.WithLabelValues(source).Set(float64(at.UnixNano()) / 1e9)
			since = at
		}
		overdue := 0.0
		if expect > 0 && now.Sub(since) > expect {
			overdue = 1
		}
		w.Metrics.SourceOverdue.WithLabelValues(source).Set(overdue)
	}
	return err
}

// The silence alarm checks at most a minute apart, and at least a
// quarter of the shortest expect_every apart, so that a source is seen
// overdue within a quarter of its expectation; never more often than
// once a second (one indexed read per source each time).
const (
	silenceMaxEvery = time.Minute
	silenceMinEvery = time.Second
)

// Interval is how often Run checks: w.Every when set, else a quarter of
// the shortest positive expect_every, between one second and one minute.
func (w *Silence) Interval() time.Duration {
	if w.Every > 0 {
		return w.Every
	}
	every := silenceMaxEvery
	for _, expect := range w.Expect {
		if expect > 0 && expect/4 < every {
			every = expect / 4
		}
	}
	return max(every, silenceMinEvery)
}

// Run checks every w.Interval() until ctx is cancelled.
func (w *Silence) Run(ctx context.Context) error {
	t := time.NewTicker(w.Interval())
	defer t.Stop()
	for {
		if err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.Log.Warn("the ledger could not be read for the silence alarm", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
