package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/ediwatch/ediwatch/internal/testenv"
)

// Cluster is a PostgreSQL primary and its streaming standby
// (pg_basebackup -R) on loopback, in a directory of their own, for a test
// that fails the primary over: stopped and removed when the test ends.
// Its servers run as the postgres user; the tests run as root.
type Cluster struct {
	t        testing.TB
	bin, dir string
	// nodes are the two servers' names (their directories) and ports;
	// primary is the index of the one that is primary now.
	nodes   [2]node
	primary int
}

type node struct {
	name string
	port int
}

// NewCluster starts a primary and its standby.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := testenv.PostgresBin(t)
	dir, _ := postgresDir(t, "ediwatch-cluster-")
	c := &Cluster{t: t, bin: bin, dir: dir, nodes: [2]node{{"node1", freePort(t)}, {"node2", freePort(t)}}}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.pg("pg_ctl", "-D", c.data(n.name), "-m", "immediate", "stop")
		}
		os.RemoveAll(dir)
	})
	c.must("initdb", "-D", c.data(c.nodes[0].name), "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8")
	c.start(c.nodes[0])
	c.addStandby(c.nodes[1])
	return c
}

// addStandby makes n a streaming standby of the primary, from a base
// backup of it.
func (c *Cluster) addStandby(n node) {
	c.t.Helper()
	c.must("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.PrimaryPort()), "-U", "postgres",
		"-D", c.data(n.name), "-R", "-X", "stream", "-c", "fast")
	c.start(n)
}

// PrimaryPort and StandbyPort are the ports of the servers that are
// primary and standby now.
func (c *Cluster) PrimaryPort() int { return c.nodes[c.primary].port }
func (c *Cluster) StandbyPort() int { return c.nodes[1-c.primary].port }

// PrimaryDSN connects to the primary alone.
func (c *Cluster) PrimaryDSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.PrimaryPort())
}

// DSN is the multi-host connection string an operator of the pair
// writes: the primary first, then the standby, read-write sessions only.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		c.nodes[0].port, c.nodes[1].port)
}

// KillPrimary stops the primary at once (-m immediate: as a crash).
func (c *Cluster) KillPrimary() {
	c.t.Helper()
	c.must("pg_ctl", "-D", c.data(c.nodes[c.primary].name), "-m", "immediate", "-w", "stop")
}

// Promote makes the standby a primary on the next timeline.
func (c *Cluster) Promote() {
	c.t.Helper()
	c.must("pg_ctl", "-D", c.data(c.nodes[1-c.primary].name), "-w", "promote")
	c.primary = 1 - c.primary
}

// Rebuild makes the old primary, killed, a standby of the new one from
// a fresh base backup (what an operator, or Patroni, does after a
// failover): the pair has a standby again.
func (c *Cluster) Rebuild() {
	c.t.Helper()
	old := c.nodes[1-c.primary]
	c.pg("pg_ctl", "-D", c.data(old.name), "-m", "immediate", "stop")
	if err := os.RemoveAll(c.data(old.name)); err != nil {
		c.t.Fatal(err)
	}
	c.addStandby(old)
}

func (c *Cluster) data(name string) string { return filepath.Join(c.dir, name) }

func (c *Cluster) start(n node) {
	c.t.Helper()
	c.must("pg_ctl", "-D", c.data(n.name), "-l", filepath.Join(c.dir, n.name+".log"), "-w", "-t", "30", "start",
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=50", n.port, c.dir))
}

func (c *Cluster) pg(prog string, args ...string) ([]byte, error) {
	return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(c.bin, prog)}, args...)...).
		CombinedOutput()
}

func (c *Cluster) must(prog string, args ...string) {
	c.t.Helper()
	if out, err := c.pg(prog, args...); err != nil {
		c.t.Fatalf("%s: %v\n%s", prog, err, out)
	}
}

// postgresDir makes a temporary directory (its name starting prefix)
// that the postgres user owns, for servers that run as that user (the
// tests run as root), and returns it with that user's credentials.
func postgresDir(t testing.TB, prefix string) (string, *syscall.Credential) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("the postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatalf("a directory for the postgres user (the tests run as root): %v", err)
	}
	return dir, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
