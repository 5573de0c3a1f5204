package poller_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/pgp/gpgtest"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

func outboxRows(c store.Counts) int {
	n := 0
	for _, v := range c.Outbox {
		n += v
	}
	return n
}

// TestOpenPGPDrop polls a drop of OpenPGP messages made by GnuPG through
// the real ingest, on SQLite and PostgreSQL.
func TestOpenPGPDrop(t *testing.T) {
	g := gpgtest.New(t)
	us, acme, stranger := g.GenKey("Riverside", "25519"), g.GenKey("Acme", "rsa"), g.GenKey("Stranger", "25519")
	var doc bytes.Buffer
	if _, err := (x12gen.Remit{Control: 42, Trace: "PGP", ClaimsPerSet: 3, EOL: "\n"}).Write(&doc); err != nil {
		t.Fatal(err)
	}
	plain := doc.Bytes()
	var newDecrypterVerify func(t *testing.T, require bool, verify string) *pgp.Decrypter
	newDecrypter := func(t *testing.T, require bool) *pgp.Decrypter {
		return newDecrypterVerify(t, require, acme.PublicFile)
	}
	newDecrypterVerify = func(t *testing.T, require bool, verify string) *pgp.Decrypter {
		d, err := pgp.NewDecrypter(pgp.DecryptFiles{PrivateKeyFile: us.SecretFile, PassphraseFile: g.PassFile,
			VerifyKeyFile: verify}, require)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

	// The same document encrypted twice (two session keys) and once in
	// clear (a source without verify_key_file) posts one payment; the
	// ledger keeps each file's own SHA-256.
	t.Run("encrypted twice is one payment", func(t *testing.T) {
		first, second := g.Encrypt(plain, us, &acme, false), g.Encrypt(plain, us, &acme, true)
		drivertest.Each(t, func(t *testing.T, st store.Store) {
			dir := t.TempDir()
			h := newHarnessOn(t, st, local.Source{}, []string{dir}, func(c *poller.Config) {
				c.Include = []string{"*"}
				c.Decrypt = newDecrypterVerify(t, false, "")
			})
			put(t, dir, "remit.835.pgp", first)
			h.poll(t)
			h.poll(t)
			once := h.counts(t)
			if once.Inbox["processed"] != 1 || outboxRows(once) == 0 {
				t.Fatalf("first message: %+v", once)
			}
			put(t, dir, "remit-again.asc", second)
			put(t, dir, "remit.835", plain)
			h.poll(t)
			h.poll(t)
			c := h.counts(t)
			if c.Inbox["processed"] != 1 || c.Sightings["duplicate"] != 2 || outboxRows(c) != outboxRows(once) ||
				c.Files["ingested"] != 3 {
				t.Fatalf("after the copies: %+v (one message gave %+v)", c, once)
			}
			paths := []string{filepath.Join(dir, "remit.835.pgp"), filepath.Join(dir, "remit-again.asc"),
				filepath.Join(dir, "remit.835")}
			states, err := st.FileStates(context.Background(), "acme", paths)
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range [][]byte{first, second, plain} {
				if got := states[paths[i]]; got.SHA256 != sum(b) || got.Size != int64(len(b)) {
					t.Errorf("%s: ledger %s/%d, want the received bytes' %s/%d", paths[i], got.SHA256, got.Size,
						sum(b), len(b))
				}
			}
		})
	})

	// Each refusal is a rejected file with its reason: nothing claimed,
	// nothing posted, no TA1, counted by reason; the poller goes on.
	t.Run("refusals are rejected files", func(t *testing.T) {
		whole := g.Encrypt(bytes.Repeat(plain, 50), us, &acme, false)
		corrupt := append([]byte(nil), whole...)
		corrupt[len(corrupt)/2] ^= 0xff
		files := map[string]struct {
			body   []byte
			reason string
		}{
			"other-key.835":   {g.Encrypt(plain, stranger, &acme, false), pgp.ReasonWrongKey},
			"stranger.835":    {g.Encrypt(plain, us, &stranger, true), pgp.ReasonUnknownSigner},
			"corrupt.835":     {corrupt, pgp.ReasonCorrupt},
			"cut.835":         {whole[:len(whole)/2], pgp.ReasonCorrupt},
			"unsigned.835":    {g.Encrypt(plain, us, nil, false), pgp.ReasonUnsigned},
			"plaintext.835":   {plain, pgp.ReasonNotEncrypted},
			"signed-only.gpg": {g.Sign(plain, acme), pgp.ReasonNotEncrypted},
		}
		drivertest.Each(t, func(t *testing.T, st store.Store) {
			dir := t.TempDir()
			h := newHarnessOn(t, st, local.Source{}, []string{dir}, func(c *poller.Config) {
				c.Include = []string{"*"}
				c.Decrypt = newDecrypter(t, true)
				c.IncompleteGrace = -1
			})
			var paths []string
			for name, f := range files {
				put(t, dir, name, f.body)
				paths = append(paths, filepath.Join(dir, name))
			}
			h.poll(t)
			if s := h.poll(t); s.Failed != len(files) {
				t.Errorf("stats %+v", s)
			}
			c := h.counts(t)
			if len(c.Inbox) != 0 || outboxRows(c) != 0 || c.Files["rejected"] != len(files) {
				t.Errorf("counts %+v: want only rejected files", c)
			}
			states, err := st.FileStates(context.Background(), "acme", paths)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{}
			for name, f := range files {
				got := states[filepath.Join(dir, name)]
				if got.Status != inbox.FileRejected || !strings.Contains(got.LastError, f.reason) &&
					!strings.Contains(got.LastError, (&pgp.Error{Reason: f.reason}).Error()) {
					t.Errorf("%s: ledger %s %q, want rejected: %s", name, got.Status, got.LastError, f.reason)
				}
				// The ledger names the bytes refused (received, not plaintext).
				if got.SHA256 != sum(f.body) || got.Size != int64(len(f.body)) {
					t.Errorf("%s: ledger %s/%d, want the received bytes' %s/%d", name, got.SHA256, got.Size,
						sum(f.body), len(f.body))
				}
				if strings.Contains(got.LastError, "CLP") {
					t.Errorf("%s: the ledger holds content: %q", name, got.LastError)
				}
				want[f.reason]++
			}
			for reason, n := range want {
				if got := testutil.ToFloat64(h.m.FilesDecryptFailed.WithLabelValues("acme", reason)); got != n {
					t.Errorf("decrypt failures %s = %v, want %v", reason, got, n)
				}
			}
			// Final: not downloaded again.
			if s := h.poll(t); s.Downloaded != 0 {
				t.Errorf("a rejected file was taken again: %+v", s)
			}
		})
	})

	// A message cut off while its mtime is within incomplete_grace is a
	// stalled upload: left for a later poll, not rejected.
	t.Run("a young cut-off message waits", func(t *testing.T) {
		whole := g.Encrypt(bytes.Repeat(plain, 50), us, &acme, false)
		dir := t.TempDir()
		h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) {
			c.Include = []string{"*"}
			c.Decrypt = newDecrypter(t, true)
			c.IncompleteGrace = time.Hour
		})
		put(t, dir, "remit.835", whole[:len(whole)/2])
		h.poll(t)
		h.poll(t)
		if c := h.counts(t); len(c.Files) != 0 {
			t.Errorf("recorded %+v", c.Files)
		}
		if got := testutil.ToFloat64(h.m.FilesSkipped.WithLabelValues("acme", "incomplete")); got != 1 {
			t.Errorf("skipped incomplete = %v", got)
		}
	})

	// One byte flipped in the middle of a message (its integrity check
	// fails) is corrupt at once, however young: not a cut-off upload.
	t.Run("a young damaged message is refused at once", func(t *testing.T) {
		damaged := g.Encrypt(bytes.Repeat(plain, 50), us, &acme, false)
		damaged[len(damaged)/2] ^= 0x01
		dir := t.TempDir()
		h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) {
			c.Include = []string{"*"}
			c.Decrypt = newDecrypter(t, true)
			c.IncompleteGrace = time.Hour
		})
		put(t, dir, "remit.835", damaged)
		h.poll(t)
		h.poll(t)
		if c := h.counts(t); c.Files["rejected"] != 1 {
			t.Errorf("recorded %+v, want the damaged file rejected", c.Files)
		}
		if got := testutil.ToFloat64(h.m.FilesDecryptFailed.WithLabelValues("acme", pgp.ReasonCorrupt)); got != 1 {
			t.Errorf("corrupt = %v, want 1", got)
		}
		if got := testutil.ToFloat64(h.m.FilesSkipped.WithLabelValues("acme", "incomplete")); got != 0 {
			t.Errorf("skipped incomplete = %v, want 0", got)
		}
	})

	// A compression bomb (a small message inflating past max_file_size)
	// is rejected as too_large, not spooled whole.
	t.Run("a compression bomb is rejected at max_file_size", func(t *testing.T) {
		bomb := g.Encrypt(make([]byte, 8<<20), us, &acme, false)
		dir := t.TempDir()
		h := newHarness(t, local.Source{}, []string{dir}, func(c *poller.Config) {
			c.Include = []string{"*"}
			c.Decrypt = newDecrypter(t, true)
			c.IncompleteGrace = -1
			c.MaxFileSize = 1 << 20
		})
		if len(bomb) >= 1<<20 {
			t.Fatalf("not a bomb: %d bytes", len(bomb))
		}
		put(t, dir, "bomb.835.pgp", bomb)
		h.poll(t)
		h.poll(t)
		if c := h.counts(t); c.Files["rejected"] != 1 || len(c.Inbox) != 0 {
			t.Errorf("counts %+v: want one rejected file", c)
		}
		if got := testutil.ToFloat64(h.m.FilesDecryptFailed.WithLabelValues("acme", pgp.ReasonTooLarge)); got != 1 {
			t.Errorf("too_large = %v", got)
		}
	})
}
