package sftp

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/ingest"
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
		RetryBase: time.Nanosecond, SpoolDir: t.TempDir()}, src, st, ingest.Options{Routes: storetest.Routes},
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
