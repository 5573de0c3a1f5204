package poller_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestSilenceAlarm: a source with expect_every is overdue once no new file
// was recorded for longer than that, counted from its last file in the
// shared ledger (whichever replica recorded it), or from the watch's start
// before its first; a new file clears it; a source without expect_every
// never alarms. On both stores.
func TestSilenceAlarm(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		start := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
		now := start
		m := metrics.New(prometheus.NewRegistry())
		w := &poller.Silence{Store: st, Metrics: m, Log: zap.NewNop(), Now: func() time.Time { return now },
			Expect: map[string]time.Duration{"era": 26 * time.Hour, "quiet": 0}}
		overdue := func(source string) float64 { return testutil.ToFloat64(m.SourceOverdue.WithLabelValues(source)) }
		check := func(when time.Time, wantERA float64) {
			t.Helper()
			now = when
			if err := w.Check(ctx); err != nil {
				t.Fatal(err)
			}
			if got := overdue("era"); got != wantERA {
				t.Errorf("at %v: era overdue %v, want %v", when, got, wantERA)
			}
			if got := overdue("quiet"); got != 0 {
				t.Errorf("at %v: a source without expect_every is overdue", when)
			}
		}
		check(start, 0)
		check(start.Add(25*time.Hour), 0) // nothing yet, but the watch is young
		check(start.Add(27*time.Hour), 1) // nothing for longer than 26h since the start

		// A file arrives (recorded by any replica): no longer overdue, and
		// its time is exported.
		arrived := start.Add(28 * time.Hour)
		var b bytes.Buffer
		x12gen.Remit{Control: 77, Trace: "SIL-"}.Write(&b)
		if _, err := inbox.Ingest(ctx, inbox.Options{Store: st, Routes: storetest.Routes}, inbox.FileInfo{Source: "era",
			Path: "in/era.835", Size: int64(b.Len()), MTime: arrived, SHA256: "s", CorrelationID: "c", Now: arrived},
			bytes.NewReader(b.Bytes())); err != nil {
			t.Fatal(err)
		}
		check(arrived.Add(time.Hour), 0)
		if got := testutil.ToFloat64(m.SourceLastFile.WithLabelValues("era")); got != float64(arrived.Unix()) {
			t.Errorf("last file %v, want %v", got, arrived.Unix())
		}
		check(arrived.Add(26*time.Hour+time.Second), 1)
	})
}

// failingLedger reads the ledger once, then fails.
type failingLedger struct {
	at    time.Time
	reads int
}

func (f *failingLedger) LastFileTimes(context.Context) (map[string]time.Time, error) {
	f.reads++
	if f.reads > 1 {
		return nil, errors.New("connection refused")
	}
	return map[string]time.Time{"era": f.at}, nil
}

// TestSilenceAlarmRunsOnWhileTheStoreFails: a store that cannot be read does
// not freeze a source at not overdue; the clock runs on from the last good
// reading.
func TestSilenceAlarmRunsOnWhileTheStoreFails(t *testing.T) {
	start := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	now := start
	m := metrics.New(prometheus.NewRegistry())
	w := &poller.Silence{Store: &failingLedger{at: start}, Metrics: m, Log: zap.NewNop(),
		Now: func() time.Time { return now }, Expect: map[string]time.Duration{"era": 26 * time.Hour}}
	if err := w.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	now = start.Add(27 * time.Hour)
	if err := w.Check(context.Background()); err == nil {
		t.Error("no error from a failing store")
	}
	if got := testutil.ToFloat64(m.SourceOverdue.WithLabelValues("era")); got != 1 {
		t.Errorf("era overdue %v after 27h with the store down, want 1", got)
	}
}

// quietLedger is a ledger with no file from any source.
type quietLedger struct{}

func (quietLedger) LastFileTimes(context.Context) (map[string]time.Time, error) {
	return map[string]time.Time{}, nil
}

// TestSilenceAlarmSeesShortExpectations: a source expected every 2 s is
// seen overdue within a quarter of that once it is late, not at the next
// minute's check; the interval follows the shortest expect_every, between
// one second and one minute.
func TestSilenceAlarmSeesShortExpectations(t *testing.T) {
	for _, c := range []struct {
		expect map[string]time.Duration
		want   time.Duration
	}{
		{map[string]time.Duration{"a": 6 * time.Second, "b": time.Hour}, 1500 * time.Millisecond},
		{map[string]time.Duration{"a": time.Hour}, time.Minute},
		{map[string]time.Duration{"a": 2 * time.Second}, time.Second},
		{map[string]time.Duration{"a": 0}, time.Minute},
	} {
		if got := (&poller.Silence{Expect: c.expect}).Interval(); got != c.want {
			t.Errorf("expect %v: checks every %v, want %v", c.expect, got, c.want)
		}
	}

	m := metrics.New(prometheus.NewRegistry())
	w := &poller.Silence{Store: quietLedger{}, Metrics: m, Log: zap.NewNop(),
		Expect: map[string]time.Duration{"era": 2 * time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(m.SourceOverdue.WithLabelValues("era")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("a source expected every 2 s and silent for 10 s is not overdue")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
