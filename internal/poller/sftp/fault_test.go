package sftp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/sftpserver"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

func newFakeServer(t *testing.T) *sftpserver.Server {
	srv, err := sftpserver.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func fakeSource(t *testing.T, srv *sftpserver.Server) *Source {
	src, err := New(Config{Address: srv.Addr, User: "partner", PrivateKeyFile: srv.KeyFile, KnownHostsFile: srv.KnownHosts,
		Timeout: 5 * time.Second, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func TestReconnectAfterTheServerDrops(t *testing.T) {
	srv := newFakeServer(t)
	src := fakeSource(t, srv)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.835"), []byte("x"), 0o644)
	ctx := context.Background()
	if _, err := src.List(ctx, dir); err != nil {
		t.Fatal(err)
	}
	srv.Drop()
	if _, err := src.List(ctx, dir); err == nil {
		t.Fatal("listing over a dropped connection succeeded")
	}
	time.Sleep(10 * time.Millisecond) // past the reconnect backoff
	got, err := src.List(ctx, dir)
	if err != nil || len(got) != 1 {
		t.Fatalf("after reconnect: %v %v", got, err)
	}
}

// cutter drops the server's connections once n bytes have been read.
type cutter struct {
	poller.Source
	srv  *sftpserver.Server
	n    int64
	once sync.Once
}

func (c *cutter) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	rc, err := c.Source.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &cutReader{rc: rc, c: c}, nil
}

type cutReader struct {
	rc   io.ReadCloser
	c    *cutter
	read int64
}

func (r *cutReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.read += int64(n)
	if r.read >= r.c.n {
		r.c.once.Do(r.c.srv.Drop)
	}
	return n, err
}

func (r *cutReader) Close() error { return r.rc.Close() }

// TestConnectionDroppedMidDownload: nothing is ingested from a download
// the server cut off; the next poll reconnects and ingests the file once.
func TestConnectionDroppedMidDownload(t *testing.T) {
	srv := newFakeServer(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	x12gen.Remit{ClaimsPerSet: 3000, LinesPerClaim: 2, EOL: "\n"}.Write(&buf)
	os.WriteFile(filepath.Join(dir, "big.835"), buf.Bytes(), 0o644)
	st := newSQLiteStore(t)
	src := &cutter{Source: fakeSource(t, srv), srv: srv, n: int64(buf.Len() / 3)}
	p := poller.New(poller.Config{Name: "acme", Directories: []string{dir}, PollInterval: time.Second,
		RetryBase: time.Nanosecond, SpoolDir: t.TempDir()}, src, st, inbox.Options{Routes: storetest.Routes},
		zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	ctx := context.Background()
	p.PollOnce(ctx)
	s, _ := p.PollOnce(ctx)
	if s.Failed != 1 || s.Ingested != 0 {
		t.Fatalf("cut download: %+v", s)
	}
	if c, _ := st.Counts(ctx); c.Inbox["processed"] != 0 || c.Outbox["pending"] != 0 {
		t.Fatalf("a cut download recorded %+v", c)
	}
	time.Sleep(10 * time.Millisecond)
	s, err := p.PollOnce(ctx)
	if err != nil || s.Ingested != 1 {
		t.Fatalf("retry: %+v %v", s, err)
	}
	if c, _ := st.Counts(ctx); c.Inbox["processed"] != 1 || c.Files["ingested"] != 1 {
		t.Errorf("after retry %+v", c)
	}
}

// stallProxy forwards TCP to a server until stalled: from then on it
// passes budget more bytes from the server and then holds the rest, as a
// server or network that stops answering mid-file would.
type stallProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	budget  atomic.Int64
	release chan struct{}
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, release: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(p.release)
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(s, c); s.Close() }()
			go func() { defer wg.Done(); p.down(c, s); c.Close() }()
		}
	}()
	return p
}

// down copies server to client, honouring a stall.
func (p *stallProxy) down(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 && p.stalled.Load() {
			left := p.budget.Add(-int64(n))
			if left < 0 {
				n = max(0, n+int(left))
			}
			c.Write(buf[:n])
			if left <= 0 {
				<-p.release
				return
			}
			continue
		}
		if n > 0 {
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestCancelledDownloadReturnsPromptly: a download from a server that
// stops answering mid-file returns with the context's error once the
// context is cancelled (shutdown does not wait for it), and the source
// reconnects for the next call.
func TestCancelledDownloadReturnsPromptly(t *testing.T) {
	srv := newFakeServer(t)
	proxy := newStallProxy(t, srv.Addr)
	_, port, _ := net.SplitHostPort(srv.Addr)
	_, proxyPort, _ := net.SplitHostPort(proxy.ln.Addr().String())
	kh, _ := os.ReadFile(srv.KnownHosts)
	knownHosts := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(knownHosts, bytes.Replace(kh, []byte("]:"+port), []byte("]:"+proxyPort), 1), 0o600)
	src, err := New(Config{Address: proxy.ln.Addr().String(), User: "partner", PrivateKeyFile: srv.KeyFile,
		KnownHostsFile: knownHosts, Timeout: 5 * time.Second, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "big.835"), bytes.Repeat([]byte("ISA*0123456789~\n"), 1<<18), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := src.Open(ctx, filepath.Join(dir, "big.835"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	proxy.budget.Store(256 << 10)
	proxy.stalled.Store(true)
	done := make(chan error, 1)
	read := make(chan struct{})
	go func() {
		_, err := io.Copy(io.Discard, io.TeeReader(rc, notify{read}))
		done <- err
	}()
	<-read // the download is under way; the server then stops answering
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled download: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("the download did not return after cancel")
	}
	proxy.stalled.Store(false)
	if got, err := src.List(context.Background(), dir); err != nil || len(got) != 1 {
		t.Errorf("after a cancelled download: %v %v", got, err)
	}
}

// notify closes its channel at the first write.
type notify struct{ c chan struct{} }

func (n notify) Write(b []byte) (int, error) {
	select {
	case <-n.c:
	default:
		close(n.c)
	}
	return len(b), nil
}
