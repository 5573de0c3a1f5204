package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/history"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// clients is how many console viewers the load phase runs at once.
const clients = 20

// pages are the console pages timed, by name; {file} is a file's
// correlation id.
var pages = []struct{ name, path string }{
	{"overview", "/"}, {"/sinks", "/sinks"}, {"/reconcile", "/reconcile"}, {"/files", "/files"},
	{"/dlq", "/dlq"}, {"/files/{id}", "/files/{file}"},
}

// loadOps are the names of what measureLoad times, in the table's order;
// rates are per second, the rest milliseconds.
var loadOps = func() []string {
	ops := []string{"ingest, 1 set", "ingest, duplicate of 1 set", "ingest, 1,000 sets"}
	for _, p := range pages {
		ops = append(ops, "console "+p.name+", 1 client")
	}
	for _, p := range pages {
		ops = append(ops, fmt.Sprintf("console %s, p95 of %d clients", p.name, clients))
	}
	return append(ops, fmt.Sprintf("ingest, 1 set, %d console clients", clients), "ingest, 1 set, while pruning",
		"commit to POST, p99", fmt.Sprintf("commit to POST, p99, %d console clients", clients))
}()

var loadRates = []string{"relay, deliveries/s", fmt.Sprintf("relay, deliveries/s, %d console clients", clients)}

// routes send the relay phases' payments to the bench sink, which the
// load's relay alone delivers (the history's own rows stay as they are);
// idleRoutes send the ingest phases' to a sink nothing delivers, so that
// each relay phase times its own 2,000 rows and no backlog.
var (
	routes = map[string][]string{process.KindPayment: {"bench"}, process.KindAck999: {"bench-acks"},
		process.KindAckTA1: {"bench-acks"}, process.KindClaim: {"bench"}}
	idleRoutes = map[string][]string{process.KindPayment: {"bench-idle"}, process.KindAck999: {"bench-acks"},
		process.KindAckTA1: {"bench-acks"}, process.KindClaim: {"bench-idle"}}
)

// measureLoad times, on a built store st (the console reading view, a
// small pool of its own as `run` gives it): ingest of one set, of a
// duplicate and of 1,000 sets; the relay's deliveries a second; every
// console page alone and at the 95th percentile of 20 viewers at once;
// ingest latency and deliveries again while the 20 viewers read; ingest
// latency while a prune pass runs; and this process's peak RSS under the
// 20 viewers.
func measureLoad(ctx context.Context, st, view store.Store, files, days, runs int, m *measured) error {
	l := &loader{st: st, runs: runs, control: controlBase()}
	if err := l.ingestOps(m); err != nil {
		return err
	}

	// The relay and its receiver.
	var arrived atomic.Int64
	posted := make(chan post, 1024)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		arrived.Add(1)
		select {
		case posted <- post{r.Header.Get("Idempotency-Key"), at}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	snk, err := sink.New(sink.Config{Name: "bench", URL: rcv.URL})
	if err != nil {
		return err
	}
	relay := func() (float64, error) {
		const sets = 2000
		l.routes = routes
		_, err := l.ingest(sets)
		l.routes = nil
		if err != nil {
			return 0, err
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 8, Batch: 32}, st, map[string]outbox.Deliverer{"bench": snk},
			zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		done := make(chan struct{})
		from := arrived.Load()
		start := time.Now()
		go func() { r.Run(rctx); close(done) }()
		for arrived.Load()-from < sets {
			if time.Since(start) > 5*time.Minute {
				cancel()
				<-done
				return 0, fmt.Errorf("relay: %d of %d delivered in 5 minutes", arrived.Load()-from, sets)
			}
			time.Sleep(2 * time.Millisecond)
		}
		rate := sets / time.Since(start).Seconds()
		cancel()
		<-done
		return rate, nil
	}
	commitToPost := func() (time.Duration, error) {
		return l.commitToPost(ctx, snk, posted)
	}
	if m.rates[loadRates[0]], err = relay(); err != nil {
		return err
	}
	if m.ops["commit to POST, p99"], err = commitToPost(); err != nil {
		return err
	}

	// The console, over its own pool.
	token := strings.Repeat("v", 32)
	c, err := console.New(console.Config{ViewerToken: token, Sources: []string{"src0", "src1", "src2"},
		Sinks: []string{"acks", "bench", "ledger"}}, view, zap.NewNop())
	if err != nil {
		return err
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 2 * time.Minute}
	getFrom := func(base, path string) (time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+strings.ReplaceAll(path, "{file}",
			history.CorrelationID(files-100)), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return time.Since(t0), nil
	}
	get := func(path string) (time.Duration, error) { return getFrom(srv.URL, path) }
	// One viewer is timed on a console that keeps no snapshot, so that
	// each request reads what a first viewer would.
	cold, err := console.New(console.Config{ViewerToken: token, Sources: []string{"src0", "src1", "src2"},
		Sinks: []string{"acks", "bench", "ledger"}, SnapshotTTL: time.Nanosecond, SnapshotStale: time.Nanosecond},
		view, zap.NewNop())
	if err != nil {
		return err
	}
	coldSrv := httptest.NewServer(cold)
	defer coldSrv.Close()
	for _, p := range pages {
		var ts []time.Duration
		for range runs {
			d, err := getFrom(coldSrv.URL, p.path)
			if err != nil {
				return err
			}
			ts = append(ts, d)
		}
		m.ops["console "+p.name+", 1 client"] = median(ts)
	}

	// 20 viewers, each reading every page in turn until stopped; the
	// first rounds are timed per page. The pages were open already (one
	// viewer read each): the viewers meet the console as it runs, not
	// its first read of the day.
	for _, p := range pages {
		if _, err := get(p.path); err != nil {
			return err
		}
	}
	resetPeakRSS()
	var mu sync.Mutex
	byPage := map[string][]time.Duration{}
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var loadErr atomic.Value
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; lctx.Err() == nil; round++ {
				for j := range pages {
					p := pages[(i+j)%len(pages)]
					d, err := get(p.path)
					if err != nil {
						if lctx.Err() == nil {
							loadErr.Store(err)
						}
						return
					}
					if round < 3 {
						mu.Lock()
						byPage[p.name] = append(byPage[p.name], d)
						mu.Unlock()
					}
				}
			}
		}()
	}
	underLoad := func() error {
		if m.rates[loadRates[1]], err = relay(); err != nil {
			return err
		}
		var ts []time.Duration
		for range runs {
			d, err := l.ingest(1)
			if err != nil {
				return err
			}
			ts = append(ts, d)
		}
		m.ops[fmt.Sprintf("ingest, 1 set, %d console clients", clients)] = median(ts)
		if m.ops[fmt.Sprintf("commit to POST, p99, %d console clients", clients)], err = commitToPost(); err != nil {
			return err
		}
		// The first three rounds of every viewer are in.
		for {
			mu.Lock()
			n := len(byPage[pages[len(pages)-1].name])
			mu.Unlock()
			if n >= 3*clients || loadErr.Load() != nil {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	err = underLoad()
	stop()
	wg.Wait()
	m.peakRSS = peakRSS()
	if err != nil {
		return err
	}
	if e, ok := loadErr.Load().(error); ok {
		return fmt.Errorf("console under load: %w", e)
	}
	for _, p := range pages {
		ts := byPage[p.name]
		slices.Sort(ts)
		m.ops[fmt.Sprintf("console %s, p95 of %d clients", p.name, clients)] = ts[len(ts)*95/100]
	}

	return nil
}

// post is a POST the load's receiver read: its Idempotency-Key (the
// effect key) and when.
type post struct {
	key string
	at  time.Time
}

// commitToPost runs a relay as `run` does (woken by the store's
// notifications where it has them) and ingests one payment at a time,
// each once the last was posted, and returns the 99th percentile of the
// time from an ingest's return (just after its commit) to the receiver's
// reading of its POST, found by its trace number among the POSTs the
// receiver sends on posted.
func (l *loader) commitToPost(ctx context.Context, snk outbox.Deliverer, posted <-chan post) (time.Duration, error) {
	const samples = 200
	l.routes = routes
	defer func() { l.routes = nil }()
	rctx, cancel := context.WithCancel(ctx)
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 8, Batch: 32}, l.st, map[string]outbox.Deliverer{"bench": snk},
		zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.Run(rctx) }()
	if ln, ok := l.st.(interface {
		Listen(context.Context, func(), func(error, time.Duration)) error
	}); ok {
		wg.Add(1)
		go func() { defer wg.Done(); ln.Listen(rctx, r.Wake, func(error, time.Duration) {}) }()
	}
	defer func() { cancel(); wg.Wait() }()
	for len(posted) > 0 {
		<-posted
	}
	ts := make([]time.Duration, 0, samples)
	for range samples {
		if _, err := l.ingest(1); err != nil {
			return 0, err
		}
		committed := time.Now()
		trace := ":L" + strconv.Itoa(l.control) + "-" // the payment's effect key holds its trace
		timeout := time.After(time.Minute)
	wait:
		for {
			select {
			case p := <-posted:
				if strings.Contains(p.key, trace) {
					ts = append(ts, max(0, p.at.Sub(committed)))
					break wait
				}
			case <-timeout:
				return 0, errors.New("commit to POST: a payment was not posted in a minute")
			}
		}
	}
	slices.Sort(ts)
	return ts[len(ts)*99/100], nil
}

// measurePruneLoad times ingest of one set, again and again, while one
// prune pass deletes a day of the oldest history (its second day; the
// first is the prune op's), as the hourly pass meets it.
func measurePruneLoad(ctx context.Context, st store.Store, days, runs int, m *measured) error {
	l := &loader{st: st, runs: runs, control: controlBase() + 500}
	cutoff := time.Now().Add(-time.Duration(days-2) * 24 * time.Hour)
	pruned := make(chan error, 1)
	go func() {
		_, err := st.Prune(ctx, cutoff, 1000)
		pruned <- err
	}()
	var ts []time.Duration
	for {
		select {
		case err := <-pruned:
			if err != nil {
				return fmt.Errorf("prune: %w", err)
			}
			if len(ts) == 0 {
				return errors.New("the prune pass ended before one ingest")
			}
			m.ops["ingest, 1 set, while pruning"] = median(ts)
			return nil
		default:
		}
		d, err := l.ingest(1)
		if err != nil {
			<-pruned
			return err
		}
		ts = append(ts, d)
	}
}

// loader ingests new remittances, each under control numbers and traces
// of its own.
type loader struct {
	st      store.Store
	runs    int
	control int
	last    []byte
	routes  map[string][]string // default idleRoutes
}

// ingest ingests a new file of sets remittances and returns how long the
// ingest took.
func (l *loader) ingest(sets int) (time.Duration, error) {
	l.control++
	var b bytes.Buffer
	if _, err := (x12gen.Remit{Control: l.control, SetsPerGroup: sets, ClaimsPerSet: 8, LinesPerClaim: 1,
		Trace: "L" + strconv.Itoa(l.control) + "-", EOL: "\n"}).Write(&b); err != nil {
		return 0, err
	}
	l.last = b.Bytes()
	return l.ingestBytes(l.last, "load"+strconv.Itoa(l.control))
}

func (l *loader) ingestBytes(data []byte, name string) (time.Duration, error) {
	now := time.Now().UTC()
	t0 := time.Now()
	r := l.routes
	if r == nil {
		r = idleRoutes
	}
	_, err := inbox.Ingest(context.Background(), inbox.Options{Store: l.st, Routes: r}, inbox.FileInfo{
		Source: "load", Path: "/outbound/835/" + name + ".835", Size: int64(len(data)), MTime: now,
		SHA256: fmt.Sprintf("%064x", l.control), CorrelationID: store.NewCorrelationID(), Now: now,
	}, bytes.NewReader(data))
	return time.Since(t0), err
}

// ingestOps times ingest of one new set, of that set again (a
// duplicate), and of 1,000 new sets.
func (l *loader) ingestOps(m *measured) error {
	var one, dup []time.Duration
	for range l.runs {
		d, err := l.ingest(1)
		if err != nil {
			return err
		}
		one = append(one, d)
		if d, err = l.ingestBytes(l.last, "again"+strconv.Itoa(l.control)); err != nil {
			return err
		}
		dup = append(dup, d)
	}
	m.ops["ingest, 1 set"], m.ops["ingest, duplicate of 1 set"] = median(one), median(dup)
	var many []time.Duration
	for range max(1, l.runs/2) {
		d, err := l.ingest(1000)
		if err != nil {
			return err
		}
		many = append(many, d)
	}
	m.ops["ingest, 1,000 sets"] = median(many)
	return nil
}

// controlBase is the first control number of a run's files: one of its
// own (a run on a kept history, -reuse, must not re-send the last run's
// files), from the clock, in ISA13's nine digits.
func controlBase() int {
	return 100_000_000 + int(time.Now().Unix()%800_000)*1000
}

func median(ts []time.Duration) time.Duration {
	slices.Sort(ts)
	return ts[len(ts)/2]
}

// resetPeakRSS resets this process's peak resident set size (Linux).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns this process's peak resident set size in bytes since
// it was last reset (VmHWM), 0 where /proc does not say.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
