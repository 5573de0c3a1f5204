package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestAutoFailoverQuorum runs the HA example as shipped: the
// pg_auto_failover formation that deploy/ha/pg_auto_failover.sh creates
// (a monitor, a primary and two standbys in a quorum of ANY 1), and
// ediwatch on the formation's multi-host DSN with wait_for_standbys
// auto, reading an OpenSSH drop with after: delete. Payments keep
// arriving while one standby is lost (writes and deletes go on: the
// other standby makes the quorum, before and after the monitor finds it
// down), once it rejoined, and across a crash
// of the primary (the monitor promotes a standby). Every payment is
// delivered, none twice, and the drop ends empty.
func TestAutoFailoverQuorum(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	script, err := filepath.Abs("../../deploy/ha/pg_auto_failover.sh")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	f := pgtest.NewFormation(t, script)
	phase("formation up")
	defer func() {
		if t.Failed() {
			t.Logf("formation logs:\n%s", f.Logs())
		}
	}()
	primary := f.Primary()
	ctx := context.Background()
	// A host that vanishes leaves its standby's WAL sender streaming
	// until wal_sender_timeout (60 s by default); 5 s here, so the wait
	// it costs deletes is seen in a short run.
	for _, n := range f.Nodes {
		conn, err := pgx.Connect(ctx, f.NodeDSN(n.Name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "ALTER SYSTEM SET wal_sender_timeout = '5s'")
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
		}
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, f.NodeDSN(primary))
	if err != nil {
		t.Fatal(err)
	}
	var names string
	err = conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names)
	conn.Close(ctx)
	if err != nil || !strings.HasPrefix(names, "ANY 1 (") || strings.Count(names, ",") != 1 {
		t.Fatalf("the primary's synchronous_standby_names is %q (%v), want a quorum of ANY 1 of its two standbys",
			names, err)
	}

	rec := &payReceiver{oks: map[string]int{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	drop, err := os.MkdirTemp(sshd.Drop, "formation-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(drop)
	if err := os.Chmod(drop, 0o777); err != nil {
		t.Fatal(err)
	}
	cfg := dropDaemonConfig(t, sshd, drop, f.DSN(), "auto", "", srv.URL)
	daemon, logs := startDaemon(t, cfg)
	defer func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	}()

	written := 0
	write := func(n int) {
		for range n {
			written++
			var b bytes.Buffer
			x12gen.Remit{Control: 2000 + written, Trace: fmt.Sprintf("AF-%d-", written), EOL: "\n"}.Write(&b)
			if err := os.WriteFile(filepath.Join(drop, fmt.Sprintf("era-%04d.835", written)), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	inDrop := func() int {
		names, _ := filepath.Glob(filepath.Join(drop, "*"))
		return len(names)
	}
	// settled: every payment written delivered and every file deleted.
	settled := func(what string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		waitFor(t, what, within, func() bool {
			n, _ := rec.delivered()
			return n == written && inDrop() == 0
		})
		phase(what)
		return time.Since(start)
	}

	write(10)
	settled("payments delivered and deleted, three nodes", 90*time.Second)

	// A standby's host vanishes (its connections left open): the other
	// standby makes the quorum, so commits and deliveries go on; its
	// files' deletes wait while the primary still counts the vanished
	// one as streaming (wait_for_standbys: auto), until its WAL sender
	// times out.
	var standby string
	for _, n := range f.Nodes {
		if n.Name != primary {
			standby = n.Name
			break
		}
	}
	f.Freeze(standby)
	write(10)
	held := settled("payments delivered and deleted with a standby's host gone", 90*time.Second)
	t.Logf("a standby's host gone: deletes held %.1fs (wal_sender_timeout 5s)", held.Seconds())
	if held < 2*time.Second {
		t.Errorf("with a standby's host gone, the deletes waited %s: not for its WAL sender's timeout (5s), "+
			"so not for the standby that still showed streaming", held)
	}
	// Its server fails and closes its connections: nothing waits.
	f.Crash(standby)
	write(10)
	settled("payments delivered and deleted with a standby down", 90*time.Second)
	f.WaitUnhealthy(standby, 2*time.Minute)
	phase("the monitor found the standby down")
	write(10)
	settled("payments delivered and deleted with the standby known down", 90*time.Second)
	f.Restart(standby)
	f.WaitHealthy(3, 3*time.Minute)
	phase("the lost standby rejoined")
	write(5)
	settled("payments delivered and deleted after it rejoined", 90*time.Second)

	// The primary crashes: the monitor promotes the standby furthest
	// along, which holds every commit the quorum acknowledged.
	f.Crash(primary)
	crashed := time.Now()
	write(10)
	settled("payments delivered and deleted after the primary crashed", 3*time.Minute)
	t.Logf("primary %s crashed; %s promoted; %d payments delivered and deleted %.1fs after the crash",
		primary, f.Primary(), 10, time.Since(crashed).Seconds())
	if p := f.Primary(); p == "" || p == primary {
		t.Errorf("%q answers as the primary after %s crashed", p, primary)
	}
	unique, doubled := rec.delivered()
	if unique != written || doubled != 0 {
		t.Errorf("%d payments written, %d delivered, %d of them twice", written, unique, doubled)
	}
}
