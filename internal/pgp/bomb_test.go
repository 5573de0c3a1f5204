package pgp_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/ediwatch/ediwatch/internal/pgp"
)

// A compression bomb: a message of a few kilobytes that inflates to many
// megabytes must be refused once its plaintext passes the cap, not
// spooled whole (a quine-style bomb would fill the disk).
func TestCompressionBombIsCappedAndRefused(t *testing.T) {
	files, us, partner := goKeys(t)
	var msg bytes.Buffer
	w, err := openpgp.Encrypt(&msg, openpgp.EntityList{us}, partner, &openpgp.FileHints{IsBinary: true},
		&packet.Config{DefaultCompressionAlgo: packet.CompressionZLIB,
			CompressionConfig: &packet.CompressionConfig{Level: 9}})
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for i := 0; i < 16; i++ {
		if _, err := w.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if msg.Len() > 1<<17 {
		t.Fatalf("not a bomb: %d bytes", msg.Len())
	}
	p := filepath.Join(t.TempDir(), "bomb.gpg")
	if err := os.WriteFile(p, msg.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := pgp.NewDecrypter(files, false)
	if err != nil {
		t.Fatal(err)
	}
	d = d.Limit(1 << 20)
	pt, n, err := d.Spool(context.Background(), f, t.TempDir())
	if err == nil {
		pt.Close()
		t.Fatalf("a 16 MiB plaintext passed a 1 MiB cap (%d bytes spooled)", n)
	}
	if pgp.ReasonOf(err) != pgp.ReasonTooLarge {
		t.Fatalf("reason %q (%v), want %q", pgp.ReasonOf(err), err, pgp.ReasonTooLarge)
	}
	// Within the cap it still opens.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	pt, n, err = d.Limit(16<<20).Spool(context.Background(), f, t.TempDir())
	if err != nil || n != 16<<20 {
		t.Fatalf("at the cap: %d bytes, %v", n, err)
	}
	pt.Close()
}
