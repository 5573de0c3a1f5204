package sftp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/sourcetest"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// openSSH returns a source on the test command's OpenSSH sshd and a drop
// factory: directories under its SFTP start directory, private to a test.
func openSSH(t *testing.T) (*Source, func(t *testing.T) sourcetest.Drop) {
	sshd := testenv.OpenSSH(t)
	src, err := New(Config{Address: sshd.Addr, User: sshd.User, PrivateKeyFile: sshd.KeyFile,
		KnownHostsFile: sshd.KnownHosts, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src, func(t *testing.T) sourcetest.Drop {
		d, err := os.MkdirTemp(sshd.Drop, "suite-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
		t.Cleanup(func() { os.RemoveAll(d) })
		// No chroot: the server sees the drop at the same path.
		return sourcetest.Drop{Local: d, Remote: d}
	}
}

func TestSourceSuiteOnOpenSSH(t *testing.T) {
	src, drops := openSSH(t)
	sourcetest.Run(t, src, drops)
}

func TestIntakeOnOpenSSH(t *testing.T) {
	src, drops := openSSH(t)
	sourcetest.RunIntake(t, src, drops)
}

func TestUnknownHostKeyIsRefused(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(empty, nil, 0o600)
	src, err := New(Config{Address: sshd.Addr, User: sshd.User, PrivateKeyFile: sshd.KeyFile, KnownHostsFile: empty})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.List(context.Background(), sshd.Drop)
	if err == nil || !strings.Contains(err.Error(), "host key of "+sshd.Addr+" is unknown") ||
		!strings.Contains(err.Error(), "ssh-ed25519 SHA256:") {
		t.Fatalf("err = %v", err)
	}
	// A changed key: known_hosts holds another key for the host.
	other := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(other, []byte("["+strings.Replace(sshd.Addr, ":", "]:", 1)+
		" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPmWQsZC1H4j4bSF4nZzj0M3QWkJbl9YfTnXg1HgkG2j\n"), 0o600)
	src2, err := New(Config{Address: sshd.Addr, User: sshd.User, PrivateKeyFile: sshd.KeyFile, KnownHostsFile: other})
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	if _, err := src2.List(context.Background(), sshd.Drop); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("changed key: %v", err)
	}
}

func TestWrongUserKeyIsAClearError(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	key := filepath.Join(t.TempDir(), "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	src, err := New(Config{Address: sshd.Addr, User: sshd.User, PrivateKeyFile: key, KnownHostsFile: sshd.KnownHosts,
		BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// Through the poller: each poll reports the error and counts it; the
	// poller keeps polling.
	m := metrics.New(prometheus.NewRegistry())
	p := poller.New(poller.Config{Name: "acme", Directories: []string{sshd.Drop}, PollInterval: time.Second},
		src, newSQLiteStore(t), inbox.Options{Routes: storetest.Routes}, zap.NewNop(), m)
	for i := 0; i < 2; i++ {
		_, err = p.PollOnce(context.Background())
		if err == nil || !strings.Contains(err.Error(), "unable to authenticate") || !strings.Contains(err.Error(), sshd.User+"@"+sshd.Addr) {
			t.Fatalf("poll %d: %v", i, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := testutil.ToFloat64(m.PollErrors.WithLabelValues("acme", "list")); got != 2 {
		t.Errorf("poll errors counted: %v", got)
	}
}

func newSQLiteStore(t *testing.T) *sqlite.Store { return drivertest.SQLite(t) }

// TestGrowingFileOverOpenSSH: a file appended between polls on a real
// OpenSSH drop is left alone while it grows, then ingested once, whole.
func TestGrowingFileOverOpenSSH(t *testing.T) {
	src, drops := openSSH(t)
	d := drops(t)
	full := storetest.Fixture(t, "835_canonical.x12")
	path := filepath.Join(d.Local, "growing.835")
	os.WriteFile(path, full[:150], 0o644)
	st := newSQLiteStore(t)
	p := poller.New(poller.Config{Name: "acme", Directories: []string{d.Remote}, PollInterval: time.Second},
		src, st, inbox.Options{Routes: storetest.Routes}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	ctx := context.Background()
	p.PollOnce(ctx)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(full[150:500])
	f.Close()
	if s, _ := p.PollOnce(ctx); s.Downloaded != 0 {
		t.Fatalf("took a growing file: %+v", s)
	}
	f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(full[500:])
	f.Close()
	p.PollOnce(ctx)
	s, err := p.PollOnce(ctx)
	if err != nil || s.Ingested != 1 {
		t.Fatalf("complete file: %+v %v", s, err)
	}
	c, _ := st.Counts(ctx)
	if c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 || c.Files["ingested"] != 1 {
		t.Errorf("counts %+v", c)
	}
}
