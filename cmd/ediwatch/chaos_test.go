package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// chaosReceiver answers with scripted faults and records one effect per
// Idempotency-Key; it refuses the poison payments with 400.
type chaosReceiver struct {
	mu       sync.Mutex
	effects  map[string]bool
	oks      map[string]int // 2xx answers per key
	requests map[string]int
	down     atomic.Bool
	faults   map[int]int
}

func (c *chaosReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.requests[key]++
	first := c.requests[key] == 1
	c.mu.Unlock()
	// Every request must carry a valid Standard Webhooks signature.
	if !sink.Verify(demoSecret, r.Header, body) {
		c.count(401)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	switch n := rand.IntN(100); {
	case c.down.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case strings.Contains(key, "POISON"):
		http.Error(w, "no such account", http.StatusBadRequest)
		return
	case first && fnv32(key)%4 == 0:
		// "Still processing that Idempotency-Key": not delivered.
		w.WriteHeader(http.StatusConflict)
		c.count(http.StatusConflict)
		return
	case n >= 15 && n < 20:
		// Slower than the relay lease (3 s); within the sink timeout (5 s).
		time.Sleep(3500 * time.Millisecond)
		c.count(slowFault)
	case n < 10:
		w.WriteHeader(http.StatusInternalServerError)
		c.count(500)
		return
	case n < 15:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		c.count(429)
		return
	}
	c.mu.Lock()
	c.effects[key] = true
	c.oks[key]++
	c.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// slowFault counts the answers slower than the relay lease.
const slowFault = 1

func fnv32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

func (c *chaosReceiver) count(status int) {
	c.mu.Lock()
	c.faults[status]++
	c.mu.Unlock()
}

// TestChaos (short form in the README test command; test/chaos runs it
// with restarts and for as long as asked): three replicas on one PostgreSQL poll two directories of
// an OpenSSH drop holding every kind of repetition and some malformed and
// poison files, while a random replica is SIGKILLed and restarted every
// 1.5 s, the receiver fails a share of requests, answers 409 to the first
// attempt at a quarter of the keys, answers a share of requests slower
// than the relay lease, and goes down for a window, and a file grows
// across polls. Verdict: every unique payment and group
// acknowledged once by Idempotency-Key, the malformed rejected, exactly the
// poison cases dead, nothing lost.
func TestChaos(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	rec := &chaosReceiver{effects: map[string]bool{}, oks: map[string]int{}, requests: map[string]int{}, faults: map[int]int{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	root, err := os.MkdirTemp(sshd.Drop, "chaos-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	dirA, dirB := filepath.Join(root, "a"), filepath.Join(root, "b")
	dirC := filepath.Join(root, "c") // intake faults: a source that deletes what it ingested
	for _, d := range []string{root, dirA, dirB, dirC} {
		os.MkdirAll(d, 0o777)
		os.Chmod(d, 0o777)
	}
	remit := func(r x12gen.Remit) []byte {
		var b bytes.Buffer
		r.Write(&b)
		return b.Bytes()
	}
	put := func(dir, name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// wave writes one wave of the workload, numbered w: 150 unique 835s with
	// every kind of repetition, malformed and poison files, 837s and a file
	// that grows across polls.
	seBad := regexp.MustCompile(`SE\*\d+\*`)
	wave := func(w int) {
		o := w * 100000
		p := fmt.Sprintf("w%d-", w)
		const unique = 150
		for i := 0; i < unique; i++ {
			trace := fmt.Sprintf("CH%d-%d-", w, i)
			data := remit(x12gen.Remit{Control: o + 20000 + i, Trace: trace, EOL: "\n"})
			put(dirA, fmt.Sprintf("%sera-%03d.835", p, i), data)
			switch {
			case i < 30:
				put(dirA, fmt.Sprintf("%sresent-%03d.835", p, i), data) // the same file under another name
			case i < 60:
				put(dirB, fmt.Sprintf("%sera-%03d.835", p, i), data) // a copy landing in the other directory
			case i < 80:
				put(dirB, fmt.Sprintf("%spipes-%03d.835", p, i), remit(x12gen.Remit{Control: o + 20000 + i, Trace: trace,
					Element: '|', Component: '>', Repetition: '!', Segment: '}', EOL: "\r\n"})) // other delimiters
			case i < 100:
				put(dirB, fmt.Sprintf("%sregenerated-%03d.835", p, i), remit(x12gen.Remit{Control: o + 30000 + i, Trace: trace}))
			}
		}
		for i := 0; i < 10; i++ {
			put(dirA, fmt.Sprintf("%smalformed-%d.835", p, i), seBad.ReplaceAll(remit(x12gen.Remit{Control: o + 40000 + i,
				Trace: fmt.Sprintf("BAD%d-%d-", w, i)}), []byte("SE*1*")))
		}
		for i := 0; i < 3; i++ {
			put(dirB, fmt.Sprintf("%spoison-%d.835", p, i), remit(x12gen.Remit{Control: o + 50000 + i, Trace: fmt.Sprintf("POISON%d-%d-", w, i)}))
		}
		for i := 0; i < 10; i++ {
			var b bytes.Buffer
			x12gen.Claims{Control: o + 60000 + i, Claims: 2, IDPrefix: fmt.Sprintf("C%d-%d-", w, i)}.Write(&b)
			put(dirA, fmt.Sprintf("%sclaims-%d.x12", p, i), b.Bytes())
		}
		growing := remit(x12gen.Remit{Control: o + 70000, Trace: fmt.Sprintf("GROW%d-", w), ClaimsPerSet: 50})
		put(dirA, p+"growing.835", growing[:100])
		go func() {
			for n := 100; n < len(growing); n += len(growing) / 8 {
				time.Sleep(300 * time.Millisecond)
				f, _ := os.OpenFile(filepath.Join(dirA, p+"growing.835"), os.O_WRONLY|os.O_APPEND, 0)
				f.Write(growing[n:min(n+len(growing)/8, len(growing))])
				f.Close()
			}
		}()
		intakeFaults(t, dirC, w)
	}
	// Per wave: 274 files; 151 payments, 20 claims and 194 999s
	// delivered; 3 poison payments dead; 10 sets rejected; 80 duplicates,
	// 20 business duplicates.
	const filesPerWave, deliveredPerWave, deadPerWave = 274 + intakeFilesPerWave, 151 + 20 + 194 + 2*intakePaymentsPerWave, 3
	long, _ := time.ParseDuration(os.Getenv("EDIWATCH_CHAOS_DURATION"))
	waves := 1
	wave(0)
	cfg, connect := pgSchemaConfig(t, srv.URL, fmt.Sprintf(`sources:
  - name: chaos
    type: sftp
    address: %q
    user: %q
    private_key_file: %q
    known_hosts_file: %q
    directories: [%q, %q]
    include: ["*.835", "*.x12"]
    poll_interval: 300ms
    stable_for: 0s
  - name: chaos-intake
    type: sftp
    address: %[1]q
    user: %[2]q
    private_key_file: %[3]q
    known_hosts_file: %[4]q
    directories: [%[7]q]
    include: ["*.835"]
    poll_interval: 300ms
    stable_for: 0s
    incomplete_grace: 10m
    after: delete
relay: {lease: 3s, workers: 4, backoff: {base: 200ms, max: 2s}}
`, sshd.Addr, sshd.User, sshd.KeyFile, sshd.KnownHosts, dirA, dirB, dirC))
	{ // both sinks sign; the receiver verifies
		secret := filepath.Join(t.TempDir(), "whsec")
		os.WriteFile(secret, []byte(demoSecret), 0o600)
		body, _ := os.ReadFile(cfg)
		body = bytes.ReplaceAll(body, []byte("timeout: 5s}"), []byte(fmt.Sprintf("timeout: 5s, secret_file: %q}", secret)))
		os.WriteFile(cfg, body, 0o600)
	}
	var mu sync.Mutex
	replicas := make([]*exec.Cmd, 3)
	for i := range replicas {
		replicas[i], _ = startDaemon(t, cfg)
	}
	kills := 0
	stop := make(chan struct{})
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(1500 * time.Millisecond):
			}
			i := rand.IntN(3)
			mu.Lock()
			replicas[i].Process.Kill()
			replicas[i].Wait()
			replicas[i], _ = startDaemon(t, cfg)
			kills++
			mu.Unlock()
		}
	}()
	go func() {
		time.Sleep(3 * time.Second)
		rec.down.Store(true) // the receiver goes down for a window
		time.Sleep(3 * time.Second)
		rec.down.Store(false)
	}()
	// Restarts of PostgreSQL and sshd, when this run owns them (test/chaos).
	restarts := os.Getenv("EDIWATCH_CHAOS_RESTARTS") == "1"
	var restarted atomic.Int32
	if restarts {
		go func() {
			time.Sleep(4 * time.Second)
			restartSSHD(t)
			restarted.Add(1)
			time.Sleep(4 * time.Second)
			restartPostgres(t)
			restarted.Add(1)
		}()
	}
	start := time.Now()
	for time.Since(start) < long {
		waitFor(t, fmt.Sprintf("wave %d to settle", waves), 300*time.Second, func() bool {
			st := outboxStatus(t, connect)
			return st["delivered"] == waves*deliveredPerWave && st["dead"] == waves*deadPerWave
		})
		wave(waves)
		waves++
	}
	waitFor(t, "the chaos run to settle", 300*time.Second, func() bool {
		st := outboxStatus(t, connect)
		return st["delivered"] == waves*deliveredPerWave && st["dead"] == waves*deadPerWave &&
			(!restarts || restarted.Load() == 2)
	})
	close(stop)
	<-chaosDone
	mu.Lock()
	for _, r := range replicas {
		r.Process.Signal(syscall.SIGTERM)
		r.Wait()
	}
	mu.Unlock()

	c := connect()
	defer c.Close(t.Context())
	var ingested, rejectedSets, processed, dups, bizdups, conflicts int
	c.QueryRow(t.Context(), "SELECT count(*) FROM remote_file WHERE status = 'ingested'").Scan(&ingested)
	c.QueryRow(t.Context(), "SELECT count(*) FILTER (WHERE status = 'rejected'), count(*) FILTER (WHERE status = 'processed') FROM inbox").Scan(&rejectedSets, &processed)
	c.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE kind = 'duplicate'), count(*) FILTER (WHERE kind = 'business_duplicate'),
		count(*) FILTER (WHERE kind = 'conflict') FROM sighting`).Scan(&dups, &bizdups, &conflicts)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	payments, acks, claims, redelivered, intakePayments := 0, 0, 0, 0, 0
	for k := range rec.effects {
		switch {
		case strings.HasPrefix(k, "payment:"):
			payments++
			if strings.Contains(k, "STALL") || strings.Contains(k, "REUSE") {
				intakePayments++
			}
		case strings.HasPrefix(k, "ack999:"):
			acks++
		case strings.HasPrefix(k, "claim:"):
			claims++
		}
	}
	for _, n := range rec.oks {
		if n > 1 {
			redelivered++
		}
	}
	// Reconcile: every parsed payment has exactly one outbox row.
	recOut, _ := command(t, "reconcile", "--json", "--config", cfg).Output()
	var report struct {
		Payers []struct {
			Parsed, Enqueued, Delivered int
			MissingEffects              []string `json:"missing_effects"`
		} `json:"payers"`
	}
	json.Unmarshal(recOut, &report)
	parsedP, enqueuedP, deliveredP, missing := 0, 0, 0, 0
	for _, p := range report.Payers {
		parsedP, enqueuedP, deliveredP, missing = parsedP+p.Parsed, enqueuedP+p.Enqueued, deliveredP+p.Delivered, missing+len(p.MissingEffects)
	}
	var poisonDead int
	c.QueryRow(t.Context(), "SELECT count(*) FROM outbox WHERE status = 'dead' AND effect_key LIKE '%POISON%'").Scan(&poisonDead)
	files := waves * filesPerWave
	table := fmt.Sprintf(`chaos verdict (%d waves, %s, restarts of sshd and PostgreSQL: %d)
  files in the drop                 %d, ingested %d
  replica SIGKILLs                  %d
  receiver faults                   %d x 500, %d x 429, one 3 s outage
  409 to first attempts             %d (retried, never taken as delivered)
  answers slower than the lease     %d (3.5 s, relay.lease 3 s)
  unique payments delivered         %d (%d per wave)
  stalled and reused-name payments  %d (%d per wave, in the unique payments)
  claims delivered                  %d (20 per wave)
  999s delivered                    %d (%d per wave)
  sets processed / rejected         %d / %d
  duplicates / business dups        %d / %d, conflicts %d
  dead (all poison)                 %d (3 per wave)
  keys answered 2xx more than once  %d (at-least-once after SIGKILLs; one effect each)
  requests with a bad signature     %d
  reconcile: payments parsed / enqueued / delivered  %d / %d / %d, missing effects %d`,
		waves, time.Since(start).Round(time.Second), restarted.Load(),
		files, ingested, kills, rec.faults[500], rec.faults[429], rec.faults[409], rec.faults[slowFault],
		payments, 151+intakePaymentsPerWave, intakePayments, intakePaymentsPerWave, claims, acks,
		194+intakePaymentsPerWave, processed, rejectedSets,
		dups, bizdups, conflicts, poisonDead, redelivered, rec.faults[401], parsedP, enqueuedP, deliveredP, missing)
	t.Log("\n" + table)
	const ip = intakePaymentsPerWave
	if ingested != files || payments != (151+ip)*waves || claims != 20*waves || acks != (194+ip)*waves ||
		rejectedSets != 10*waves || poisonDead != 3*waves || conflicts != 0 || dups != 80*waves || bizdups != 20*waves ||
		rec.faults[401] != 0 || intakePayments != ip*waves ||
		parsedP != (154+ip)*waves || enqueuedP != (154+ip)*waves || deliveredP != (151+ip)*waves || missing != 0 ||
		rec.faults[409] == 0 || rec.faults[slowFault] == 0 {
		t.Errorf("verdict violated:\n%s", table)
	}
}

// The intake faults of one wave, in a source that deletes what it
// ingested: uploads that stall mid-file (the partner's handle stays open)
// beyond the stable check and complete later, within incomplete_grace; and
// names reused while the previous file under that name is being ingested
// (the new file is uploaded as soon as the old one is claimed).
const (
	intakeStalled, intakeReused = 2, 2
	// Each stalled upload and each version under a reused name is one
	// payment, with its 999; each path is one ledger row.
	intakePaymentsPerWave = intakeStalled + 2*intakeReused
	intakeFilesPerWave    = intakeStalled + intakeReused
)

func intakeFaults(t *testing.T, dir string, w int) {
	o := w * 100000
	remit := func(r x12gen.Remit) []byte {
		var b bytes.Buffer
		r.Write(&b)
		return b.Bytes()
	}
	for i := 0; i < intakeStalled; i++ {
		data := remit(x12gen.Remit{Control: o + 80000 + i, Trace: fmt.Sprintf("STALL%d-%d-", w, i), ClaimsPerSet: 20, EOL: "\n"})
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("w%d-stalled-%d.835", w, i)), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data[:len(data)/2])
		go func() {
			defer f.Close()
			time.Sleep(3 * time.Second) // many polls see it stable, with no IEA
			f.Write(data[len(data)/2:])
		}()
	}
	for i := 0; i < intakeReused; i++ {
		name := filepath.Join(dir, fmt.Sprintf("w%d-ERA835-%d.835", w, i))
		first := remit(x12gen.Remit{Control: o + 81000 + i, Trace: fmt.Sprintf("REUSE%d-%d-A-", w, i), ClaimsPerSet: 200, EOL: "\n"})
		second := remit(x12gen.Remit{Control: o + 82000 + i, Trace: fmt.Sprintf("REUSE%d-%d-B-", w, i), ClaimsPerSet: 200, EOL: "\n"})
		if err := os.WriteFile(name, first, 0o644); err != nil {
			t.Fatal(err)
		}
		go func() {
			// The name is free once the first file is claimed for its ingest.
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
					break
				}
			}
			tmp := filepath.Join(dir, ".upload-"+filepath.Base(name)+".part")
			os.WriteFile(tmp, second, 0o644)
			os.Rename(tmp, name)
		}()
	}
}

// restartSSHD stops the run's own sshd and starts it again on the same port
// and host key.
func restartSSHD(t *testing.T) {
	conf := os.Getenv("EDIWATCH_TEST_SSHD_CONFIG")
	pidFile := filepath.Join(filepath.Dir(conf), "sshd.pid")
	if pid, err := os.ReadFile(pidFile); err == nil {
		exec.Command("kill", strings.TrimSpace(string(pid))).Run()
	}
	time.Sleep(500 * time.Millisecond)
	if err := exec.Command("/usr/sbin/sshd", "-f", conf).Run(); err != nil {
		t.Errorf("restart sshd: %v", err)
	}
	t.Log("sshd restarted")
}

// restartPostgres restarts the run's own PostgreSQL (immediate stop, as a
// crash would).
func restartPostgres(t *testing.T) {
	// -l: the new server must not inherit this process's output.
	err := exec.Command("runuser", "-u", "postgres", "--", filepath.Join(os.Getenv("EDIWATCH_TEST_PG_BIN"), "pg_ctl"),
		"-D", os.Getenv("EDIWATCH_TEST_PG_DATA"), "-l", os.Getenv("EDIWATCH_TEST_PG_LOG"), "-m", "immediate", "-w",
		"restart").Run()
	if err != nil {
		t.Errorf("restart postgres: %v", err)
	}
	t.Log("postgres restarted")
}
