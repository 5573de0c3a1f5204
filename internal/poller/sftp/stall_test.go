package sftp

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// stallableSSHD starts a second OpenSSH sshd whose SFTP sessions run
// OpenSSH's sftp-server, each writing its pid to a file first, so a test
// can stop the SFTP server of a session while sshd itself goes on
// answering (keepalives included): a server whose disk hangs, or an SFTP
// back end stuck behind a live SSH front. It returns a source on it, a
// drop directory both sides see at one path, and stop and resume.
func stallableSSHD(t *testing.T, timeout time.Duration) (src *Source, drop string, stop, resume func()) {
	sshd := testenv.OpenSSH(t)
	drop, err := os.MkdirTemp(sshd.Drop, "stall-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(drop, 0o777)
	t.Cleanup(func() { os.RemoveAll(drop) })
	pids := filepath.Join(drop, ".pids")
	server := "/usr/lib/openssh/sftp-server"
	if _, err := os.Stat(server); err != nil {
		server = "/usr/lib/sftp-server"
	}
	addr, knownHosts := secondSSHD(t, "echo $$ >>"+pids+"; exec "+server)
	signal := func(sig syscall.Signal) {
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, sig)
			}
		}
	}
	var once sync.Once
	resume = func() { once.Do(func() { signal(syscall.SIGCONT) }) }
	t.Cleanup(resume)
	src, err = New(Config{Address: addr, User: sshd.User, PrivateKeyFile: sshd.KeyFile, KnownHostsFile: knownHosts,
		Timeout: timeout, Keepalive: 200 * time.Millisecond,
		BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src, drop, func() { signal(syscall.SIGSTOP) }, resume
}

// TestSFTPServerStalledMidDownloadTimesOut: the SFTP server stops
// answering in the middle of a download while sshd still answers
// keepalives. The download fails once nothing has come for the timeout
// (it does not wait for good, holding the directory's poll and its lease),
// and the next call reconnects.
func TestSFTPServerStalledMidDownloadTimesOut(t *testing.T) {
	src, drop, stop, resume := stallableSSHD(t, 2*time.Second)
	big := filepath.Join(drop, "big.835")
	os.WriteFile(big, bytes.Repeat([]byte("ISA*0123456789~\n"), 1<<20), 0o644) // 16 MB
	rc, err := src.Open(context.Background(), big)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	done := make(chan error, 1)
	go func() {
		// As the poller downloads: the file's WriteTo, concurrent reads.
		_, err := io.Copy(onWrite{w: io.Discard, f: stop}, rc)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a download from a stalled server succeeded")
		} else if !strings.Contains(err.Error(), "no answer") {
			t.Errorf("err = %v, want it to say the server gave no answer", err)
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		resume() // so the file's close is answered
		t.Fatal("the download from a stalled server still waits a minute later")
	}
	resume()
	if got, err := src.List(context.Background(), drop); err != nil || len(got) != 2 {
		t.Errorf("after a stalled download: %v %v", got, err)
	}
}

// TestSFTPServerStalledListingTimesOut: as above, for a listing.
func TestSFTPServerStalledListingTimesOut(t *testing.T) {
	src, drop, stop, resume := stallableSSHD(t, 2*time.Second)
	os.WriteFile(filepath.Join(drop, "a.835"), []byte("ISA"), 0o644)
	if _, err := src.List(context.Background(), drop); err != nil {
		t.Fatal(err)
	}
	stop()
	done := make(chan error, 1)
	go func() { _, err := src.List(context.Background(), drop); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a listing from a stalled server succeeded")
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		resume()
		t.Fatal("the listing from a stalled server still waits a minute later")
	}
	resume()
	if got, err := src.List(context.Background(), drop); err != nil || len(got) != 2 {
		t.Errorf("after a stalled listing: %v %v", got, err)
	}
}

// TestPollOfAStalledSFTPServerRecovers: a poll whose download stalls ends
// (the file is retried), and a later poll ingests the file.
func TestPollOfAStalledSFTPServerRecovers(t *testing.T) {
	src, drop, stop, resume := stallableSSHD(t, 2*time.Second)
	var buf bytes.Buffer
	x12gen.Remit{ClaimsPerSet: 20000, LinesPerClaim: 2, EOL: "\n"}.Write(&buf)
	os.WriteFile(filepath.Join(drop, "big.835"), buf.Bytes(), 0o644)
	st := newSQLiteStore(t)
	hs := &stallOnOpen{Source: src, stop: stop}
	p := poller.New(poller.Config{Name: "acme", Directories: []string{drop}, Include: []string{"*.835"}, PollInterval: time.Second,
		RetryBase: time.Nanosecond, RetryMax: time.Nanosecond, SpoolDir: t.TempDir()}, hs, st,
		inbox.Options{Routes: storetest.Routes}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	ctx := context.Background()
	p.PollOnce(ctx) // seen once
	done := make(chan Stats, 1)
	go func() { s, _ := p.PollOnce(ctx); done <- Stats(s) }()
	select {
	case s := <-done:
		if s.Failed != 1 || s.Ingested != 0 {
			t.Fatalf("the stalled poll: %+v", s)
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		resume()
		t.Fatal("the poll of a stalled server still runs a minute later")
	}
	resume()
	var last poller.Stats
	for range 3 {
		time.Sleep(10 * time.Millisecond) // past the reconnect backoff
		if last, _ = p.PollOnce(ctx); last.Ingested == 1 {
			break
		}
	}
	if c, _ := st.Counts(ctx); c.Inbox["processed"] != 1 || c.Files["ingested"] != 1 {
		t.Errorf("after the server resumed: %+v (last poll %+v)", c, last)
	}
}

// Stats is poller.Stats, named for the channel above.
type Stats = poller.Stats

// stallOnOpen stops the server once the first download is under way.
type stallOnOpen struct {
	poller.Source
	stop func()
	once sync.Once
}

func (s *stallOnOpen) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	rc, err := s.Source.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &stallingFile{ReadCloser: rc, stop: func() { s.once.Do(s.stop) }}, nil
}

// stallingFile downloads through the file's WriteTo, as the poller's
// io.Copy does, and stops the server at the first bytes.
type stallingFile struct {
	io.ReadCloser
	stop func()
}

func (f *stallingFile) WriteTo(w io.Writer) (int64, error) {
	return f.ReadCloser.(io.WriterTo).WriteTo(onWrite{w: w, f: f.stop})
}

// onWrite calls f before every write to w (f is expected to act once).
type onWrite struct {
	w io.Writer
	f func()
}

func (o onWrite) Write(b []byte) (int, error) {
	o.f()
	return o.w.Write(b)
}

// TestShutdownDuringAStalledSFTPServerReturns: a download from an SFTP
// server that stopped answering (well within the timeout) returns at
// once when its context is cancelled, a shutdown, and the source still
// closes: dropping the connection does not wait on the stalled server.
func TestShutdownDuringAStalledSFTPServerReturns(t *testing.T) {
	src, drop, stop, resume := stallableSSHD(t, time.Hour)
	big := filepath.Join(drop, "big.835")
	os.WriteFile(big, bytes.Repeat([]byte("ISA*0123456789~\n"), 1<<20), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := src.Open(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(onWrite{w: io.Discard, f: func() { stop(); cancel() }}, rc)
		done <- err
	}()
	closed := make(chan struct{})
	go func() { <-done; src.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		resume()
		t.Fatal("a cancelled download from a stalled server (or the source's close) still waits a minute later")
	}
}
