package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ediwatch/ediwatch/internal/testenv"
)

// Cluster is a PostgreSQL primary and its streaming standby
// (pg_basebackup -R) on loopback, in a directory of their own, for a test
// that fails the primary over: stopped and removed when the test ends.
// Its servers run as the postgres user; the tests run as root.
type Cluster struct {
	t                        testing.TB
	bin, dir                 string
	PrimaryPort, StandbyPort int
}

// NewCluster starts a primary and its standby.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := testenv.PostgresBin(t)
	dir, err := os.MkdirTemp("", "ediwatch-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, dir: dir, PrimaryPort: freePort(t), StandbyPort: freePort(t)}
	t.Cleanup(func() {
		for _, d := range []string{"standby", "primary"} {
			c.pg("pg_ctl", "-D", filepath.Join(dir, d), "-m", "immediate", "stop")
		}
		os.RemoveAll(dir)
	})
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
		t.Fatalf("a cluster's directory for the postgres user (the tests run as root): %v", err)
	}
	c.must("initdb", "-D", c.data("primary"), "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8")
	c.start("primary", c.PrimaryPort)
	c.must("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.PrimaryPort), "-U", "postgres",
		"-D", c.data("standby"), "-R", "-X", "stream")
	c.start("standby", c.StandbyPort)
	return c
}

// DSN is the multi-host connection string an operator of the pair
// writes: the primary first, then the standby, read-write sessions only.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		c.PrimaryPort, c.StandbyPort)
}

// KillPrimary stops the primary at once (-m immediate: as a crash).
func (c *Cluster) KillPrimary() {
	c.t.Helper()
	c.must("pg_ctl", "-D", c.data("primary"), "-m", "immediate", "-w", "stop")
}

// Promote makes the standby a primary on the next timeline.
func (c *Cluster) Promote() {
	c.t.Helper()
	c.must("pg_ctl", "-D", c.data("standby"), "-w", "promote")
}

func (c *Cluster) data(name string) string { return filepath.Join(c.dir, name) }

func (c *Cluster) start(name string, port int) {
	c.t.Helper()
	c.must("pg_ctl", "-D", c.data(name), "-l", filepath.Join(c.dir, name+".log"), "-w", "-t", "30", "start",
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=50", port, c.dir))
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

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
