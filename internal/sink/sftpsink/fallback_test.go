package sftpsink

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	psftp "github.com/ediwatch/ediwatch/internal/poller/sftp"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// TestAnEarlierUploadOfTheSameEffectCounts: a file an earlier attempt
// renamed into place (its delivery not recorded before a crash) stands
// under the final name; SFTP's rename refuses to replace it, and the
// delivery counts because it holds the same bytes: one file, no temporary
// one left.
func TestAnEarlierUploadOfTheSameEffectCounts(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	dir, err := os.MkdirTemp(sshd.Drop, "sink-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := New(Config{Name: "p", Directory: dir, Timeout: 10 * time.Second, Conn: psftp.Config{Address: sshd.Addr,
		User: sshd.User, PrivateKeyFile: sshd.KeyFile, KnownHostsFile: sshd.KnownHosts}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload, _ := json.Marshal(map[string]string{"k": "v"})
	msg := sink.Message{EffectKey: "payment:P:1", Kind: "payment.posted", Payload: payload, CreatedAt: time.Now()}
	name, body, err := FileName(DefaultName, msg)
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, name)
	os.WriteFile(old, body, 0o644)
	if res := s.Deliver(context.Background(), msg, time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("delivery: %+v", res)
	}
	es, _ := os.ReadDir(dir)
	if b, _ := os.ReadFile(old); len(es) != 1 || string(b) != string(body) {
		t.Errorf("%d files; %q", len(es), b)
	}
}
