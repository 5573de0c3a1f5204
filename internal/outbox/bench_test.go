package outbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

func pgbenchPath() string {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	return "/usr/lib/postgresql/15/bin/pgbench"
}

// pgbenchTPS runs `pgbench -N` with clients connections for d on url.
func pgbenchTPS(b *testing.B, url string, clients int, d time.Duration) float64 {
	if out, err := exec.Command(pgbenchPath(), "-i", "-q", "-s", "1", url).CombinedOutput(); err != nil {
		b.Fatalf("pgbench -i: %v: %s", err, out)
	}
	out, err := exec.Command(pgbenchPath(), "-N", "-c", strconv.Itoa(clients), "-j", "2",
		"-T", strconv.Itoa(int(d.Seconds())), url).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench: %v: %s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		b.Fatalf("pgbench output: %s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	return tps
}

// BenchmarkRelayVsPgbench: deliveries per second from PostgreSQL to a
// local no-op HTTP receiver with 8 workers, beside pgbench -N with 8
// clients on the same database, in the same run (goal >= 1.0); then
// commit-to-POST latency with LISTEN/NOTIFY on an idle relay (goal p99 <
// 100 ms). Run with bench/relay.
func BenchmarkRelayVsPgbench(b *testing.B) {
	url := testenv.PostgresURL(b)
	ctx := context.Background()
	st := pgtest.New(b, postgres.Options{MaxConns: 20})
	const rows = 20000
	payload := []byte(`{"amount":"150.00"}`)
	now := time.Now().UTC()
	var seed [][]any
	for i := 0; i < rows; i++ {
		key := fmt.Sprintf("payment:BENCH:%d", i)
		seed = append(seed, []any{key, "payment.posted", "ledger", key, "c", outbox.PackPayload(payload), now, now, now})
	}
	if _, err := st.Pool().CopyFrom(ctx, pgx.Identifier{"outbox"}, []string{"effect_key", "kind", "sink", "ordering_key",
		"correlation_id", "payload_packed", "next_attempt_at", "created_at", "updated_at"}, pgx.CopyFromRows(seed)); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived[r.Header.Get("Idempotency-Key")] = time.Now()
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	s, _ := sink.New(sink.Config{Name: "ledger", URL: srv.URL})
	var deliveries, tps float64
	var p50, p99 time.Duration
	for b.Loop() {
		tps = pgbenchTPS(b, url, 8, 5*time.Second)
		rctx, cancel := context.WithCancel(ctx)
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 8, Batch: 32}, st, map[string]outbox.Deliverer{"ledger": s, "acks": s},
			zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		start := time.Now()
		done := make(chan struct{})
		go func() { r.Run(rctx); close(done) }()
		for {
			mu.Lock()
			n := len(arrived)
			mu.Unlock()
			if n >= rows {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		deliveries = rows / time.Since(start).Seconds()
		cancel()
		<-done

		// Latency: an idle relay woken by NOTIFY only (one-minute idle poll).
		lctx, lcancel := context.WithCancel(ctx)
		lr := outbox.NewRelay(outbox.RelayConfig{Workers: 2, Idle: time.Minute}, st, map[string]outbox.Deliverer{"ledger": s, "acks": s},
			zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		ldone := make(chan struct{}, 2)
		go func() { lr.Run(lctx); ldone <- struct{}{} }()
		go func() { st.Listen(lctx, lr.Wake, nil); ldone <- struct{}{} }()
		time.Sleep(300 * time.Millisecond)
		var lat []time.Duration
		base := storetest.Fixture(b, "835_canonical.x12")
		for i := 0; i < 100; i++ {
			data := []byte(regexp.MustCompile(`EFT0001`).ReplaceAllString(string(base), fmt.Sprintf("LAT%04d", i)))
			data = []byte(regexp.MustCompile(`000000101`).ReplaceAllString(string(data), fmt.Sprintf("%09d", 800000+i)))
			data = []byte(regexp.MustCompile(`\*101\*X\*|GE\*1\*101`).ReplaceAllStringFunc(string(data), func(m string) string {
				if m[0] == '*' {
					return fmt.Sprintf("*%d*X*", 800000+i)
				}
				return fmt.Sprintf("GE*1*%d", 800000+i)
			}))
			if _, err := storetest.IngestNow(b, st, fmt.Sprintf("lat%d", i), data); err != nil {
				b.Fatal(err)
			}
			committed := time.Now()
			key := fmt.Sprintf("payment:1512345678:LAT%04d", i)
			for {
				mu.Lock()
				at, ok := arrived[key]
				mu.Unlock()
				if ok {
					lat = append(lat, at.Sub(committed))
					break
				}
				if time.Since(committed) > 5*time.Second {
					b.Fatalf("%s not delivered", key)
				}
				time.Sleep(100 * time.Microsecond)
			}
			time.Sleep(10 * time.Millisecond)
		}
		lcancel()
		<-ldone
		<-ldone
		slices.Sort(lat)
		p50, p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	b.ReportMetric(deliveries, "deliveries/s")
	b.ReportMetric(tps, "pgbench-N-tps")
	b.ReportMetric(deliveries/tps, "ratio")
	b.ReportMetric(float64(p50.Microseconds())/1000, "notify-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "notify-p99-ms")
}

// BenchmarkCommitToPOSTUnderLoad: commit-to-POST latency while the relay
// sustains 1,000 deliveries a second (goal p99 < 10 ms). A producer
// commits one outbox row every millisecond for ten seconds, each in its own
// transaction with the NOTIFY an ingest sends, on PostgreSQL with fsync on;
// the relay (default configuration, woken by LISTEN) delivers to a real
// HTTP receiver, which notes when each row arrives. Latency is the
// receiver's arrival time minus the time the producer's COMMIT returned.
// Run with bench/relay.
func BenchmarkCommitToPOSTUnderLoad(b *testing.B) {
	const (
		rate     = 1000 // rows a second
		duration = 10 * time.Second
		rows     = int(rate * duration / time.Second)
	)
	ctx := context.Background()
	st := pgtest.New(b, postgres.Options{MaxConns: 40})
	var mu sync.Mutex
	arrived := make(map[string]time.Time, rows)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		mu.Lock()
		arrived[r.Header.Get("Idempotency-Key")] = at
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	s, _ := sink.New(sink.Config{Name: "ledger", URL: srv.URL})
	var p50, p99, pmax time.Duration
	var commitRate, deliveryRate float64
	for b.Loop() {
		clear(arrived)
		// Start from a clean checkpoint, not from what an earlier
		// benchmark left to write.
		if _, err := st.Pool().Exec(ctx, "CHECKPOINT"); err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		r := outbox.NewRelay(outbox.RelayConfig{}, st, map[string]outbox.Deliverer{"ledger": s, "acks": s},
			zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		done := make(chan struct{}, 2)
		go func() { r.Run(rctx); done <- struct{}{} }()
		go func() { st.Listen(rctx, r.Wake, nil); done <- struct{}{} }()
		time.Sleep(300 * time.Millisecond)

		committed := make([]time.Time, rows)
		keys := make([]string, rows)
		packed := outbox.PackPayload([]byte(`{"amount":"150.00"}`))
		run := b.Name()
		for i := range keys {
			keys[i] = fmt.Sprintf("payment:LOAD:%s:%d", run, i)
		}
		// Row i is due at start + i ms; producers commit in parallel so a
		// slow fsync does not hold the next row back.
		start := time.Now().Add(10 * time.Millisecond)
		var next sync.Mutex
		nextRow := 0
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					next.Lock()
					i := nextRow
					nextRow++
					next.Unlock()
					if i >= rows {
						return
					}
					time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate)))
					now := time.Now().UTC()
					// One statement, one implicit transaction: the row
					// and the NOTIFY an ingest sends, both at COMMIT.
					_, err := st.Pool().Exec(ctx, `WITH row AS (INSERT INTO outbox (effect_key, kind, sink, ordering_key,
						correlation_id, payload_packed, next_attempt_at, created_at, updated_at) VALUES ($1, 'payment.posted',
						'ledger', $1, 'c', $4, $2, $2, $2) RETURNING 1)
						SELECT pg_notify($3, '') FROM row`, keys[i], now, postgres.NotifyChannel, packed)
					if err != nil {
						b.Error(err)
						return
					}
					committed[i] = time.Now()
				}
			}()
		}
		wg.Wait()
		producerEnd := time.Now()
		for {
			mu.Lock()
			n := len(arrived)
			mu.Unlock()
			if n >= rows {
				break
			}
			if time.Since(producerEnd) > 30*time.Second {
				b.Fatalf("%d of %d rows delivered", n, rows)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		<-done
		<-done
		var lat []time.Duration
		first, last := committed[0], time.Time{}
		mu.Lock()
		for i, k := range keys {
			at := arrived[k]
			lat = append(lat, at.Sub(committed[i]))
			if at.After(last) {
				last = at
			}
		}
		mu.Unlock()
		slices.Sort(lat)
		p50, p99, pmax = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
		commitRate = float64(rows) / committed[rows-1].Sub(first).Seconds()
		deliveryRate = float64(rows) / last.Sub(first).Seconds()
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(commitRate, "commits/s")
	b.ReportMetric(deliveryRate, "deliveries/s")
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(pmax), "max-ms")
}
