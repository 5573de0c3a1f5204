package sftpsink_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/pgp/gpgtest"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/sink/sftpsink"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// TestEncryptToUploadsWhatThePartnersGnuPGOpens: with encrypt_to and
// sign_with, the file in the partner's folder is an OpenPGP message that
// GnuPG decrypts to the acknowledgment and whose signature is ours; the
// delivery's size check passed on the message's size.
func TestEncryptToUploadsWhatThePartnersGnuPGOpens(t *testing.T) {
	g := gpgtest.New(t)
	us, acme := g.GenKey("Riverside", "25519"), g.GenKey("Acme", "rsa")
	enc, err := pgp.NewEncrypter(acme.PublicFile, pgp.SignFiles{PrivateKeyFile: us.SecretFile, PassphraseFile: g.PassFile})
	if err != nil {
		t.Fatal(err)
	}
	sshd := testenv.OpenSSH(t)
	dir := folder(t, sshd)
	s := newSink(t, sshd, "", dir, func(c *sftpsink.Config) { c.Encrypt = enc; c.Pattern = "{control}.{ext}.pgp" })
	msg := ackMessage("000000042")
	_, body, err := sftpsink.FileName("{control}.{ext}", msg)
	if err != nil {
		t.Fatal(err)
	}
	if res := s.Deliver(context.Background(), msg, time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("delivery: %+v", res)
	}
	got, err := os.ReadFile(filepath.Join(dir, "000000042.x12.pgp"))
	if err != nil {
		t.Fatal(err)
	}
	if !pgp.IsMessage(got) || bytes.Contains(got, []byte("RIVERSIDE")) {
		t.Fatalf("uploaded in clear: %q", got[:min(len(got), 40)])
	}
	// The partner's GnuPG decrypts it and checks our signature (its status
	// lines say GOODSIG and name our key).
	out := g.Run(got, "--status-fd", "1", "--decrypt")
	if !bytes.Contains(out, []byte("[GNUPG:] GOODSIG")) || !bytes.Contains(out, body) {
		t.Errorf("gpg --decrypt:\n%s", out)
	}
}

// TestAnEarlierEncryptedUploadOfTheSameEffectCounts: an encrypted upload
// renamed into place whose delivery was not recorded (a crash, a lost
// answer) is retried; the retry seals the acknowledgment again and must
// still recognise the file as its own, not as another effect's file under
// the name (ErrNameTaken, retried until dead-lettered). With
// rename: false, a cut-off encrypted upload must likewise be completed.
func TestAnEarlierEncryptedUploadOfTheSameEffectCounts(t *testing.T) {
	g := gpgtest.New(t)
	us, acme := g.GenKey("Riverside", "25519"), g.GenKey("Acme", "rsa")
	enc, err := pgp.NewEncrypter(acme.PublicFile, pgp.SignFiles{PrivateKeyFile: us.SecretFile, PassphraseFile: g.PassFile})
	if err != nil {
		t.Fatal(err)
	}
	sshd := testenv.OpenSSH(t)
	for _, direct := range []bool{false, true} {
		dir := folder(t, sshd)
		s := newSink(t, sshd, "", dir, func(c *sftpsink.Config) {
			c.Encrypt = enc
			c.Pattern = "{control}.{ext}.pgp"
			c.Direct = direct
		})
		msg := ackMessage("000000043")
		for i := 0; i < 2; i++ {
			if res := s.Deliver(context.Background(), msg, time.Now()); res.Outcome != sink.Delivered {
				t.Fatalf("direct %v, delivery %d: %+v", direct, i+1, res)
			}
		}
		if direct {
			// A cut-off first upload: the start of the message.
			p := filepath.Join(dir, "000000043.x12.pgp")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
				t.Fatal(err)
			}
			if res := s.Deliver(context.Background(), msg, time.Now()); res.Outcome != sink.Delivered {
				t.Fatalf("after a cut-off upload: %+v", res)
			}
		}
		es, _ := os.ReadDir(dir)
		if len(es) != 1 {
			t.Fatalf("direct %v: %d files", direct, len(es))
		}
		got, _ := os.ReadFile(filepath.Join(dir, es[0].Name()))
		if out := g.Run(got, "--status-fd", "1", "--decrypt"); !bytes.Contains(out, []byte("[GNUPG:] GOODSIG")) {
			t.Errorf("direct %v: gpg --decrypt:\n%s", direct, out)
		}
	}
}
