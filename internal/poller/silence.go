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
	Every   time.Duration
	Log     *zap.Logger
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

// Run checks every w.Every (default one minute) until ctx is cancelled.
func (w *Silence) Run(ctx context.Context) error {
	every := w.Every
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
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
