package poller_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/sftp"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestThreeReplicasOnePostgresOneSFTP: three pollers of one source share a
// PostgreSQL store and poll one OpenSSH drop of 500 files, 100 of them
// copies under other names. One replica dies mid-way; another takes over
// after the lease TTL. Every set is processed once, and files are
// downloaded about once each.
func TestThreeReplicasOnePostgresOneSFTP(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	ctx := context.Background()
	st := pgtest.New(t, postgres.Options{})
	drop, err := os.MkdirTemp(sshd.Drop, "replicas-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(drop, 0o777)
	defer os.RemoveAll(drop)
	var files [][]byte
	for i := 0; i < 400; i++ {
		var b bytes.Buffer
		x12gen.Remit{Control: 5000 + i, Trace: fmt.Sprintf("R%d-", i), EOL: "\n"}.Write(&b)
		files = append(files, b.Bytes())
		os.WriteFile(filepath.Join(drop, fmt.Sprintf("era-%03d.835", i)), b.Bytes(), 0o644)
	}
	for i := 0; i < 100; i++ {
		os.WriteFile(filepath.Join(drop, fmt.Sprintf("resent-%03d.835", i)), files[i*4], 0o644)
	}
	type replica struct {
		p *poller.Poller
		m *metrics.Metrics
	}
	var replicas []replica
	for i := 0; i < 3; i++ {
		src, err := sftp.New(sftp.Config{Address: sshd.Addr, User: sshd.User, PrivateKeyFile: sshd.KeyFile,
			KnownHostsFile: sshd.KnownHosts})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		m := metrics.New(prometheus.NewRegistry())
		p := poller.New(poller.Config{Name: "acme", Directories: []string{drop}, PollInterval: 50 * time.Millisecond,
			Include: []string{"*.835"}, Holder: fmt.Sprintf("replica-%d", i), LeaseTTL: time.Second,
			MaxFilesPerPoll: 150, Downloads: 4, SpoolDir: t.TempDir()}, src, st, inbox.Options{Routes: storetest.Routes},
			zap.NewNop(), m)
		replicas = append(replicas, replica{p, m})
	}
	// Replica 0 polls first and dies after two polls, holding its lease.
	replicas[0].p.PollOnce(ctx)
	replicas[0].p.PollOnce(ctx)
	deadline := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	for _, r := range replicas[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				r.p.PollOnce(ctx)
				c, _ := st.Counts(ctx)
				if c.Files["ingested"] == 500 {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	c, err := st.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Files["ingested"] != 500 || c.Inbox["processed"] != 400 || c.Sightings["duplicate"] != 100 ||
		c.Outbox["pending"] != 800 || c.Sightings["conflict"] != 0 {
		t.Fatalf("counts %+v: every set processed once", c)
	}
	downloads := 0.0
	for i, r := range replicas {
		d := testutil.ToFloat64(r.m.FilesDownloaded.WithLabelValues("acme"))
		t.Logf("replica %d downloaded %v files", i, d)
		downloads += d
	}
	t.Logf("downloads per file: %.3f", downloads/500)
	if downloads < 500 || downloads > 550 {
		t.Errorf("%v downloads for 500 files", downloads)
	}
}
