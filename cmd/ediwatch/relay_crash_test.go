package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// dedupReceiver records requests and effects: one effect per
// Idempotency-Key, however often it is delivered. It flags a key delivered
// while an earlier request for it is still in flight.
type dedupReceiver struct {
	mu         sync.Mutex
	requests   map[string]int
	effects    map[string]bool
	inflight   map[string]int
	concurrent []string
	onRequest  func(n int) // called with the request count before answering
	total      int
}

func (d *dedupReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	io.Copy(io.Discard, r.Body)
	d.mu.Lock()
	d.total++
	n := d.total
	d.requests[key]++
	d.inflight[key]++
	if d.inflight[key] > 1 {
		d.concurrent = append(d.concurrent, key)
	}
	d.effects[key] = true
	hook := d.onRequest
	d.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	time.Sleep(2 * time.Millisecond)
	d.mu.Lock()
	d.inflight[key]--
	d.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func newDedup() *dedupReceiver {
	return &dedupReceiver{requests: map[string]int{}, effects: map[string]bool{}, inflight: map[string]int{}}
}

func pgSchemaConfig(t *testing.T, receiverURL, extra string) (string, func() *pgx.Conn) {
	url := testenv.PostgresURL(t)
	schema := fmt.Sprintf("run_%d", time.Now().UnixNano())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	conn.Exec(ctx, "CREATE SCHEMA "+schema)
	conn.Close(ctx)
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), url); err == nil {
			c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	path := filepath.Join(t.TempDir(), "ediwatch.yaml")
	body := fmt.Sprintf(`store: {driver: postgres, dsn: %q}
sinks:
  ledger: {url: %q, timeout: 5s}
  acks: {url: %q, timeout: 5s}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: acks, ack.ta1: acks}
http: {listen: "127.0.0.1:0"}
log: {level: debug}
%s`, url+"&search_path="+schema, receiverURL, receiverURL, extra)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() *pgx.Conn {
		// PostgreSQL may be restarting (test/chaos): retry for a while.
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := pgx.Connect(context.Background(), url+"&search_path="+schema)
			if err == nil {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func outboxStatus(t *testing.T, connect func() *pgx.Conn) map[string]int {
	c := connect()
	defer c.Close(context.Background())
	rows, err := c.Query(context.Background(), "SELECT status, count(*) FROM outbox GROUP BY status")
	if err != nil {
		return map[string]int{} // not migrated yet: the daemon is starting
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		rows.Scan(&s, &n)
		out[s] = n
	}
	return out
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }

func startDaemon(t *testing.T, cfg string) (*exec.Cmd, *syncBuffer) {
	cmd := command(t, "run", "--config", cfg)
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, logs
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRelayKilledAfterTheReceiverAnswered: the daemon is SIGKILLed while
// the receiver handles its first request (it answers 200 into a dead
// connection). After a restart the row is delivered again with the same
// Idempotency-Key; a receiver that dedupes by it records one effect.
func TestRelayKilledAfterTheReceiverAnswered(t *testing.T) {
	rec := newDedup()
	srv := httptest.NewServer(rec)
	defer srv.Close()
	cfg, connect := pgSchemaConfig(t, srv.URL, "relay: {lease: 2s, workers: 1}")
	if out, err := command(t, "ingest", "--config", cfg, fixture("835_canonical.x12")).CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v: %s", err, out)
	}
	first, _ := startDaemon(t, cfg)
	killed := make(chan struct{})
	rec.mu.Lock()
	rec.onRequest = func(n int) {
		if n == 1 {
			first.Process.Kill() // SIGKILL: no chance to record the delivery
			first.Wait()
			close(killed)
		}
	}
	rec.mu.Unlock()
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery attempt")
	}
	rec.mu.Lock()
	rec.onRequest = nil
	rec.mu.Unlock()
	if st := outboxStatus(t, connect); st["delivered"] == 2 {
		t.Fatalf("a row was recorded delivered by a killed process: %v", st)
	}
	startDaemon(t, cfg)
	waitFor(t, "delivery after restart", 30*time.Second, func() bool { return outboxStatus(t, connect)["delivered"] == 2 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.effects) != 2 {
		t.Errorf("receiver effects %v: one payment and one 999", rec.effects)
	}
	again := 0
	for key, n := range rec.requests {
		if n > 1 {
			again++
			t.Logf("%s delivered %d times with one Idempotency-Key", key, n)
		}
	}
	if again != 1 {
		t.Errorf("requests per key %v: the interrupted row must be delivered again", rec.requests)
	}
}

// TestTwoRelaysNeverShareARow: two daemons deliver 200 payments and their
// 999s from one database; no row is ever in flight twice, and every row is
// delivered once.
func TestTwoRelaysNeverShareARow(t *testing.T) {
	rec := newDedup()
	srv := httptest.NewServer(rec)
	defer srv.Close()
	cfg, connect := pgSchemaConfig(t, srv.URL, "relay: {lease: 60s, workers: 4}")
	dir := t.TempDir()
	for i := 0; i < 200; i++ {
		var b bytes.Buffer
		x12gen.Remit{Control: 3000 + i, Trace: fmt.Sprintf("TWO%d-", i)}.Write(&b)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.835", i)), b.Bytes(), 0o644)
	}
	if out, err := command(t, "ingest", "--config", cfg, dir).CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v: %s", err, out)
	}
	startDaemon(t, cfg)
	startDaemon(t, cfg)
	waitFor(t, "400 deliveries", 60*time.Second, func() bool { return outboxStatus(t, connect)["delivered"] == 400 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.concurrent) > 0 {
		t.Errorf("rows in flight twice at once: %v", rec.concurrent)
	}
	for key, n := range rec.requests {
		if n != 1 {
			t.Errorf("%s delivered %d times", key, n)
		}
	}
	if len(rec.requests) != 400 {
		t.Errorf("%d keys delivered", len(rec.requests))
	}
}

// TestRunStopsCleanlyOnSIGTERM: the daemon serves health and metrics and
// exits 0 on SIGTERM.
func TestRunStopsCleanlyOnSIGTERM(t *testing.T) {
	rec := newDedup()
	srv := httptest.NewServer(rec)
	defer srv.Close()
	cfg, _ := pgSchemaConfig(t, srv.URL, "")
	cmd, logs := startDaemon(t, cfg)
	var addr string
	waitFor(t, "startup", 20*time.Second, func() bool {
		for _, line := range bytes.Split(logs.Bytes(), []byte("\n")) {
			if i := bytes.Index(line, []byte(`"http":"`)); i >= 0 {
				addr = string(line[i+8 : i+8+bytes.IndexByte(line[i+8:], '"')])
				return true
			}
		}
		return false
	})
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, resp, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if p == "/metrics" {
			checkMetrics(t, body)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v\n%s", err, logs)
		}
	case <-time.After(35 * time.Second):
		t.Fatal("did not stop")
	}
	if _, err := config.Load(cfg); err != nil {
		t.Fatal(err)
	}
}

// TestRelayKilledBeforeDelivery: rows committed by an ingest survive a
// daemon SIGKILLed before it could deliver them (its receiver is down);
// after a restart against a live receiver they are delivered.
func TestRelayKilledBeforeDelivery(t *testing.T) {
	rec := newDedup()
	live := httptest.NewServer(rec)
	defer live.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // nothing listens there now
	cfg, connect := pgSchemaConfig(t, downURL, "relay: {lease: 2s, backoff: {base: 100ms, max: 200ms}}")
	if out, err := command(t, "ingest", "--config", cfg, fixture("835_canonical.x12")).CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v: %s", err, out)
	}
	first, _ := startDaemon(t, cfg)
	time.Sleep(500 * time.Millisecond) // attempts fail against the closed port
	first.Process.Kill()
	first.Wait()
	if st := outboxStatus(t, connect); st["delivered"] != 0 || st["pending"]+st["inflight"] != 2 {
		t.Fatalf("before restart: %v", st)
	}
	body, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, bytes.ReplaceAll(body, []byte(downURL), []byte(live.URL)), 0o600)
	startDaemon(t, cfg)
	waitFor(t, "delivery after restart", 30*time.Second, func() bool { return outboxStatus(t, connect)["delivered"] == 2 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.effects) != 2 {
		t.Errorf("effects %v", rec.effects)
	}
}

// TestDLQCommands: list shows a dead row without its payload, replay
// queues it again, discard resolves it and keeps it.
func TestDLQCommands(t *testing.T) {
	cfg, connect := pgSchemaConfig(t, "http://127.0.0.1:9/", "")
	if out, err := command(t, "ingest", "--config", cfg, fixture("835_canonical.x12")).CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v: %s", err, out)
	}
	c := connect()
	c.Exec(context.Background(), "UPDATE outbox SET status = 'dead', last_status = 400, last_error = 'HTTP 400: no'")
	c.Close(context.Background())
	out, err := command(t, "dlq", "list", "--json", "--config", cfg).Output()
	if err != nil || bytes.Count(out, []byte("\n")) != 2 || !bytes.Contains(out, []byte(`"last_status":400`)) ||
		bytes.Contains(out, []byte("DOE")) {
		t.Fatalf("list: %v %s", err, out)
	}
	if out, err := command(t, "dlq", "show", "1", "--config", cfg).Output(); err != nil || bytes.Contains(out, []byte("DOE")) {
		t.Errorf("show without --show-phi: %v %s", err, out)
	}
	if out, _ := command(t, "dlq", "show", "1", "--show-phi", "--config", cfg).Output(); !bytes.Contains(out, []byte("payload")) {
		t.Errorf("show --show-phi: %s", out)
	}
	if out, err := command(t, "dlq", "replay", "1", "--config", cfg).Output(); err != nil || !bytes.Contains(out, []byte("1 rows queued")) {
		t.Errorf("replay: %v %s", err, out)
	}
	if out, err := command(t, "dlq", "discard", "2", "--config", cfg).Output(); err != nil || !bytes.Contains(out, []byte("1 rows discarded")) {
		t.Errorf("discard: %v %s", err, out)
	}
	if st := outboxStatus(t, connect); st["pending"] != 1 || st["discarded"] != 1 {
		t.Errorf("after replay and discard: %v", st)
	}
	if _, err := command(t, "dlq", "replay", "--config", cfg).Output(); err == nil {
		t.Error("replay with nothing named succeeded")
	}
}

// checkMetrics checks a scrape for the metrics operators alert on, and
// lints it with promtool (from the test command; required under CI).
func checkMetrics(t *testing.T, body []byte) {
	t.Helper()
	for _, name := range []string{
		"ediwatch_transaction_sets_total{outcome=\"duplicate\"}", "ediwatch_transaction_sets_total{outcome=\"conflict\"}",
		"ediwatch_outbox_pending{sink=\"ledger\"}", "ediwatch_outbox_dead{sink=\"ledger\"}",
		"ediwatch_outbox_oldest_pending_seconds{sink=\"acks\"}", "ediwatch_deliveries_total{outcome=\"dead\",sink=\"ledger\"}",
		"ediwatch_circuit_breaker_state{sink=\"ledger\"}", "ediwatch_build_info{", "ediwatch_unbalanced_remittances_total", "ediwatch_reconciliation_divergence 0",
	} {
		if !bytes.Contains(body, []byte(name)) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	promtool := os.Getenv("EDIWATCH_PROMTOOL")
	if promtool == "" {
		if testenv.InCI() {
			t.Fatal("EDIWATCH_PROMTOOL is not set: run the tests with scripts/test.sh")
		}
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestDaemonEndToEnd: a real daemon process polls a real OpenSSH drop,
// ingests into PostgreSQL and delivers to an HTTP receiver; reconcile
// finds nothing diverging; SIGTERM exits 0; and its logs, at debug level,
// hold none of the fixtures' patient names or ids.
func TestDaemonEndToEnd(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	rec := newDedup()
	srv := httptest.NewServer(rec)
	defer srv.Close()
	drop, err := os.MkdirTemp(sshd.Drop, "e2e-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(drop, 0o777)
	defer os.RemoveAll(drop)
	for name, fix := range map[string]string{"a.835": "835_canonical.x12", "a-again.835": "835_crlf.x12",
		"regenerated.835": "835_regenerated.x12", "broken.835": "err_se01_count.x12"} {
		data, _ := os.ReadFile(fixture(fix))
		os.WriteFile(filepath.Join(drop, name), data, 0o644)
	}
	cfg, connect := pgSchemaConfig(t, srv.URL, fmt.Sprintf(`sources:
  - name: acme-era
    type: sftp
    address: %q
    user: %q
    private_key_file: %q
    known_hosts_file: %q
    directories: [%q]
    include: ["*.835"]
    poll_interval: 200ms
    stable_for: 0s
    after: "move:%s/archive"
`, sshd.Addr, sshd.User, sshd.KeyFile, sshd.KnownHosts, drop, drop))
	cmd, logs := startDaemon(t, cfg)
	// One payment (the re-send is a duplicate, the regenerated copy a
	// business duplicate); 999s for the three groups; a conflicting broken
	// copy of a.835's key posts nothing.
	waitFor(t, "the drop to be processed", 30*time.Second, func() bool {
		st := outboxStatus(t, connect)
		rec.mu.Lock()
		n := len(rec.effects)
		rec.mu.Unlock()
		// Every file moved too: the move follows each ingest, and a poll
		// under load may still be moving the last one.
		moved, _ := filepath.Glob(filepath.Join(drop, "archive", "*.835"))
		return st["delivered"] == n && n >= 3 && st["pending"]+st["inflight"] == 0 && len(moved) >= 4
	})
	moved, _ := filepath.Glob(filepath.Join(drop, "archive", "*.835"))
	if len(moved) != 4 {
		t.Errorf("%d files archived, want 4", len(moved))
	}
	rec.mu.Lock()
	payments := 0
	for key := range rec.effects {
		if strings.HasPrefix(key, "payment:") {
			payments++
		}
	}
	rec.mu.Unlock()
	if payments != 1 {
		t.Errorf("%d payments posted, want 1", payments)
	}
	if out, err := command(t, "reconcile", "--config", cfg).CombinedOutput(); err != nil {
		t.Errorf("reconcile: %v\n%s", err, out)
	}
	// The poller's series, and the whole scrape through promtool.
	var addr string
	for _, line := range bytes.Split(logs.Bytes(), []byte("\n")) {
		if i := bytes.Index(line, []byte(`"http":"`)); i >= 0 {
			addr = string(line[i+8 : i+8+bytes.IndexByte(line[i+8:], '"')])
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{`ediwatch_files_listed_total{source="acme-era"}`, `ediwatch_files_downloaded_total{source="acme-era"} 4`,
		`ediwatch_files_skipped_total{reason="unstable",source="acme-era"}`, `ediwatch_poll_duration_seconds_bucket{source="acme-era"`,
		`ediwatch_poll_errors_total{source="acme-era",stage="list"} 0`, `ediwatch_transaction_sets_total{outcome="business_duplicate"} 1`,
		`ediwatch_transaction_sets_total{outcome="duplicate"} 1`,
		`ediwatch_deliveries_total{outcome="delivered",sink="ledger"}`, `ediwatch_delivery_duration_seconds_bucket{sink="acks"`,
		`ediwatch_files_post_processed_total{action="move",source="acme-era"} 4`} {
		if !bytes.Contains(body, []byte(name)) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	// broken.835 shares a.835's key with other content: a conflict when it
	// comes second, a rejected claim (then reclaimed by a.835) when first.
	if !bytes.Contains(body, []byte(`ediwatch_transaction_sets_total{outcome="conflict"} 1`)) &&
		!bytes.Contains(body, []byte(`ediwatch_transaction_sets_total{outcome="rejected"} 1`)) {
		t.Error("/metrics counts broken.835 neither as a conflict nor as rejected")
	}
	checkMetrics(t, body)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	for _, phi := range []string{"DOE", "JANE", "MEMBER001", "PCN001"} {
		if strings.Contains(logs.String(), phi) {
			t.Errorf("the daemon's logs hold %q", phi)
		}
	}
	if !strings.Contains(logs.String(), `"msg":"file ingested"`) {
		t.Errorf("no ingest logged:\n%s", logs.String())
	}
}
