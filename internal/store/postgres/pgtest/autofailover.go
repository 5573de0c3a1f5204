package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/testenv"
)

// Formation is a pg_auto_failover formation on loopback, created by the
// project's own example (deploy/ha/pg_auto_failover.sh): a monitor and
// three PostgreSQL nodes, each node kept running by its `pg_autoctl run`
// in a process group of its own, so that Crash and Freeze take a node's
// keeper and server down at once. Stopped and removed when the test
// ends.
type Formation struct {
	t          testing.TB
	dir        string
	script     string
	env        []string
	cred       *syscall.Credential
	monitorURI string
	// Nodes are the three nodes' names (node1..node3) and ports.
	Nodes []FormationNode
	run   map[string]*exec.Cmd // name -> its pg_autoctl run, while up
}

// FormationNode is one PostgreSQL node of a Formation.
type FormationNode struct {
	Name string
	Port int
}

// NewFormation creates and starts the formation from script (the path
// of deploy/ha/pg_auto_failover.sh) and waits until it has a primary
// and two standbys.
func NewFormation(t testing.TB, script string) *Formation {
	t.Helper()
	autoctl := testenv.PgAutoctl(t)
	bin := testenv.PostgresBin(t)
	// A formation left running by a test binary that timed out (its
	// cleanup never ran) would hold ports and processor time.
	killMatching(filepath.Join(os.TempDir(), "ediwatch-formation-"))
	dir, cred := postgresDir(t, "ediwatch-formation-")
	f := &Formation{t: t, dir: dir, script: script, cred: cred, run: map[string]*exec.Cmd{}}
	// pg_autoctl keeps its state and pid files under the XDG directories.
	f.env = []string{"HOME=" + dir, "PATH=" + bin + ":" + filepath.Dir(autoctl) + ":/usr/bin:/bin",
		"PG_CONFIG=" + filepath.Join(bin, "pg_config"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_RUNTIME_DIR=" + filepath.Join(dir, "run"),
		"NODE_HOST=127.0.0.1", "PG_AUTH=trust", "PG_SSL=--no-ssl"}
	t.Cleanup(func() {
		for name := range f.run {
			f.Crash(name)
		}
		os.RemoveAll(dir)
	})
	monitorPort := freePort(t)
	f.monitorURI = fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", monitorPort)
	f.create("monitor", monitorPort, "monitor", "--listen", "127.0.0.1")
	f.start("monitor")
	for i := 1; i <= 3; i++ {
		n := FormationNode{Name: fmt.Sprintf("node%d", i), Port: freePort(t)}
		f.Nodes = append(f.Nodes, n)
		// One at a time: the first is the primary, the others clone it.
		f.create(n.Name, n.Port, "node", n.Name, "--listen", "127.0.0.1")
		f.start(n.Name)
		f.WaitHealthy(i, 3*time.Minute)
	}
	return f
}

// create runs the example script for one node.
func (f *Formation) create(name string, port int, args ...string) {
	f.t.Helper()
	cmd := exec.Command("bash", append([]string{f.script}, args...)...)
	cmd.Env = append(f.env, "PGDATA="+filepath.Join(f.dir, name), fmt.Sprintf("PGPORT=%d", port),
		"MONITOR_URI="+f.monitorURI)
	cmd.Dir = f.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: f.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("%s %s: %v\n%s", f.script, strings.Join(args, " "), err, out)
	}
}

// start runs `pg_autoctl run` for the node name, in a process group of
// its own, its log in the formation's directory.
func (f *Formation) start(name string) {
	f.t.Helper()
	log, err := os.OpenFile(filepath.Join(f.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(testenv.PgAutoctl(f.t), "run", "--pgdata", filepath.Join(f.dir, name))
	cmd.Env = f.env
	cmd.Dir = f.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: f.cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.t.Fatalf("pg_autoctl run %s: %v", name, err)
	}
	f.run[name] = cmd
}

// Crash kills the node name's keeper and server at once (SIGKILL to its
// process group and to its server's backends, each in a session of its
// own; a stopped one too), as a host that fails and closes its
// connections would, and removes their pid files, as its reboot would.
func (f *Formation) Crash(name string) {
	cmd := f.run[name]
	if cmd == nil {
		return
	}
	backends := f.backends(name)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for _, pid := range backends {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	cmd.Wait()
	delete(f.run, name)
	// Anything of the node outside the group (none expected).
	killMatching(filepath.Join(f.dir, name))
	os.Remove(filepath.Join(f.dir, name, "postmaster.pid"))
	os.RemoveAll(filepath.Join(f.dir, "run", "pg_autoctl", f.dir, name))
}

// Freeze stops the node name's keeper, server and backends (SIGSTOP)
// with their connections open, as a host that vanishes leaves them: its
// standby's WAL sender on the primary shows it streaming until
// wal_sender_timeout. Crash ends it.
func (f *Formation) Freeze(name string) {
	cmd := f.run[name]
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGSTOP)
	for _, pid := range f.backends(name) {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
}

// backends returns the pids of the node name's server's children (its
// backends, WAL receiver and sender, background workers): PostgreSQL
// puts each in a session of its own, out of the keeper's process group.
func (f *Formation) backends(name string) []int {
	var postmaster int
	if b, err := os.ReadFile(filepath.Join(f.dir, name, "postmaster.pid")); err == nil {
		postmaster, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	}
	if postmaster == 0 {
		return nil
	}
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so from its end.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(postmaster) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// killMatching SIGKILLs every process whose command line names a path
// under prefix (a formation's directory, or a node's).
func killMatching(prefix string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), prefix) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// WaitUnhealthy waits until the monitor has found the node name down.
func (f *Formation) WaitUnhealthy(name string, within time.Duration) {
	f.t.Helper()
	within = f.within(within)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if states, err := f.States(); err == nil && strings.HasSuffix(states[name], " (unhealthy)") {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	f.t.Fatalf("the monitor has not found %s down in %s\n%s", name, within, f.Logs())
}

// Restart starts the crashed node name again: its keeper restarts its
// server, which rejoins the formation as a standby.
func (f *Formation) Restart(name string) {
	f.t.Helper()
	f.start(name)
}

// DSN is the connection string an operator of the formation writes for
// ediwatch: every node, read-write sessions only (what `pg_autoctl show
// uri --formation default` prints, less its TLS).
func (f *Formation) DSN() string {
	hosts := make([]string, len(f.Nodes))
	for i, n := range f.Nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.Port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") +
		"/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}

// NodeDSN connects to the node name alone.
func (f *Formation) NodeDSN(name string) string {
	for _, n := range f.Nodes {
		if n.Name == name {
			return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", n.Port)
		}
	}
	f.t.Fatalf("no node %s", name)
	return ""
}

// States returns each node's state as the monitor reports it, by name:
// its reported state, with " (unhealthy)" appended while the monitor's
// health checks fail.
func (f *Formation) States() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.monitorURI)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nodename, reportedstate::text || CASE WHEN health = 1 THEN '' ELSE ' (unhealthy)' END
		FROM pgautofailover.node`)
	if err != nil {
		return nil, err
	}
	states, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var s [2]string
		err := r.Scan(&s[0], &s[1])
		return s, err
	})
	out := map[string]string{}
	for _, s := range states {
		out[s[0]] = s[1]
	}
	return out, err
}

// Primary returns the name of the node that answers as a primary (not
// in recovery), "" for none.
func (f *Formation) Primary() string {
	for _, n := range f.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		conn, err := pgx.Connect(ctx, f.NodeDSN(n.Name))
		if err == nil {
			var standby bool
			err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby)
			conn.Close(ctx)
			if err == nil && !standby {
				cancel()
				return n.Name
			}
		}
		cancel()
	}
	return ""
}

// within caps d so that a wait that fails still leaves the test's
// cleanup time to stop the formation before the test binary's deadline.
func (f *Formation) within(d time.Duration) time.Duration {
	if deadline, ok := f.t.(interface{ Deadline() (time.Time, bool) }); ok {
		if at, set := deadline.Deadline(); set {
			return max(time.Second, min(d, time.Until(at)-time.Minute))
		}
	}
	return d
}

// WaitHealthy waits until the monitor reports n nodes: one primary and
// the rest secondaries (one node alone: "single").
func (f *Formation) WaitHealthy(n int, within time.Duration) {
	f.t.Helper()
	within = f.within(within)
	deadline := time.Now().Add(within)
	var states map[string]string
	for time.Now().Before(deadline) {
		var err error
		states, err = f.States()
		primaries, secondaries := 0, 0
		for _, s := range states {
			primaries += b2i(s == "primary")
			secondaries += b2i(s == "secondary")
		}
		if n == 1 && states[f.Nodes[0].Name] == "single" ||
			err == nil && len(states) == n && primaries == 1 && secondaries == n-1 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	f.t.Fatalf("the formation is not one primary and %d standbys in %s: %v\n%s", n-1, within, states, f.Logs())
}

// Logs returns the tail of every node's log, for a failed test.
func (f *Formation) Logs() string {
	var b strings.Builder
	for _, name := range []string{"monitor", "node1", "node2", "node3"} {
		out, _ := os.ReadFile(filepath.Join(f.dir, name+".log"))
		if len(out) > 3000 {
			out = out[len(out)-3000:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", name, out)
	}
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
