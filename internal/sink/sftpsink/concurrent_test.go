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

// TestAFileThePartnerTakesAtOnceCountsAsDelivered: a partner whose poller
// takes each file the moment it appears (or a server that moves a file
// away when it is closed, as mailbox servers without RENAME do) leaves
// nothing under the final name by the time the upload would look. The
// upload was complete and in place: the delivery counts, for it is not to
// be sent again (a second 999 in the partner's system).
func TestAFileThePartnerTakesAtOnceCountsAsDelivered(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	for _, direct := range []bool{false, true} {
		dir, err := os.MkdirTemp(sshd.Drop, "sink-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		t.Cleanup(func() { os.RemoveAll(dir) })
		s, err := New(Config{Name: "p", Directory: dir, Direct: direct, Timeout: 20 * time.Second,
			Conn: psftp.Config{Address: sshd.Addr, User: sshd.User, PrivateKeyFile: sshd.KeyFile, KnownHostsFile: sshd.KnownHosts}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		payload, _ := json.Marshal(map[string]string{"k": "v"})
		msg := sink.Message{EffectKey: "payment:P:2", Kind: "payment.posted", Payload: payload, CreatedAt: time.Now()}
		name, body, err := FileName(DefaultName, msg)
		if err != nil {
			t.Fatal(err)
		}
		var taken []byte
		take := func() { // the partner's poller
			if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
				taken = b
				os.Remove(filepath.Join(dir, name))
			}
		}
		s.hook = func(stage string) {
			if stage == "renamed" || direct && stage == "written" {
				take()
			}
		}
		res := s.Deliver(context.Background(), msg, time.Now())
		if !bytes.Equal(taken, body) {
			t.Fatalf("direct %v: the partner took %d bytes of %d", direct, len(taken), len(body))
		}
		if res.Outcome != sink.Delivered {
			t.Errorf("direct %v: a complete file the partner took at once is not delivered (to be sent again): %+v", direct, res)
		}
	}
}
