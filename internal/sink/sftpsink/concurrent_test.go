package sftpsink

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	psftp "github.com/ediwatch/ediwatch/internal/poller/sftp"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// TestConcurrentUploadsOfOneRowNeverShowAPartialFile: two workers deliver
// the same row at once (a lease that lapsed mid-upload gave it to a second
// worker or replica). The second one opens its upload while the first is
// about to rename: the first must still rename a complete file into place,
// so the final name never holds less than the whole body, and both
// deliveries succeed without leaving a temporary file.
func TestConcurrentUploadsOfOneRowNeverShowAPartialFile(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	dir, err := os.MkdirTemp(sshd.Drop, "sink-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	t.Cleanup(func() { os.RemoveAll(dir) })
	newSFTP := func() *SFTP {
		s, err := New(Config{Name: "p", Directory: dir, Timeout: 20 * time.Second, Conn: psftp.Config{Address: sshd.Addr,
			User: sshd.User, PrivateKeyFile: sshd.KeyFile, KnownHostsFile: sshd.KnownHosts}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	first, second := newSFTP(), newSFTP() // two replicas
	payload, _ := json.Marshal(map[string]string{"note": strings.Repeat("0123456789", 10_000)})
	msg := sink.Message{EffectKey: "payment:P:1", Kind: "payment.posted", Payload: payload, CreatedAt: time.Now()}
	name, body, err := FileName(DefaultName, msg)
	if err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(dir, name)

	secondOpened, firstDone := make(chan struct{}), make(chan struct{})
	var secondRes sink.Result
	var wg sync.WaitGroup
	first.hook = func(stage string) {
		if stage != "written" {
			return
		}
		// The first upload is complete under its temporary name; the
		// second worker starts its own and is mid-upload when the first
		// renames.
		second.hook = func(stage string) {
			if stage == "opened" {
				close(secondOpened)
				<-firstDone
			}
		}
		wg.Add(1)
		go func() { defer wg.Done(); secondRes = second.Deliver(context.Background(), msg, time.Now()) }()
		<-secondOpened
	}
	firstRes := first.Deliver(context.Background(), msg, time.Now())
	got, statErr := os.ReadFile(final)
	close(firstDone)
	wg.Wait()
	if statErr == nil && !bytes.Equal(got, body) {
		t.Errorf("the final name showed %d bytes of %d while the second upload ran", len(got), len(body))
	}
	if firstRes.Outcome != sink.Delivered || secondRes.Outcome != sink.Delivered {
		t.Errorf("first %+v, second %+v", firstRes, secondRes)
	}
	if b, _ := os.ReadFile(final); !bytes.Equal(b, body) {
		t.Errorf("final file %d bytes, want %d", len(b), len(body))
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Errorf("files %v, want only %s", names, name)
	}
}
