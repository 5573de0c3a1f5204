package poller_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// BenchmarkEncryptedPeakRSS200MB is BenchmarkPeakRSS200MB with the 835
// sent as an OpenPGP message (encrypted to us, signed by the partner,
// compressed as GnuPG does): downloaded, decrypted and verified into the
// plaintext spool, then ingested. Run it alone in its process (bench/poll
// does). Goal: the plaintext run's < 128 MB.
func BenchmarkEncryptedPeakRSS200MB(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	// Compression among the keys' preferences, as GnuPG's keys have it:
	// go-crypto compresses only what the recipient accepts.
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, DefaultCompressionAlgo: packet.CompressionZLIB}
	us, _ := openpgp.NewEntity("Riverside", "", "riverside@example.test", cfg)
	partner, _ := openpgp.NewEntity("Acme", "", "acme@example.test", cfg)
	keys := b.TempDir()
	files := pgp.DecryptFiles{PrivateKeyFile: filepath.Join(keys, "us.gpg"), VerifyKeyFile: filepath.Join(keys, "acme.gpg")}
	kf, _ := os.Create(files.PrivateKeyFile)
	us.SerializePrivate(kf, nil)
	kf.Close()
	pf, _ := os.Create(files.VerifyKeyFile)
	partner.Serialize(pf)
	pf.Close()
	dec, err := pgp.NewDecrypter(files, true)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := os.Create(filepath.Join(e.drop, "big.835.gpg"))
	w := bufio.NewWriterSize(f, 1<<20)
	pw, err := openpgp.Encrypt(w, openpgp.EntityList{us}, partner, &openpgp.FileHints{IsBinary: true},
		&packet.Config{DefaultCompressionAlgo: packet.CompressionZLIB, CompressionConfig: &packet.CompressionConfig{Level: 6}})
	if err != nil {
		b.Fatal(err)
	}
	x12gen.Remit{Interchanges: 1, SetsPerGroup: 200, ClaimsPerSet: 3100, LinesPerClaim: 2, EOL: "\n"}.Write(pw)
	if err := pw.Close(); err != nil {
		b.Fatal(err)
	}
	w.Flush()
	fi, _ := f.Stat()
	f.Close()
	before := vmHWM(b)
	for b.Loop() {
		p := e.poller(b, func(c *poller.Config) { c.Decrypt = dec })
		p.PollOnce(ctx)
		st, err := p.PollOnce(ctx)
		if err != nil || st.Ingested != 1 {
			b.Fatalf("%+v %v", st, err)
		}
	}
	c, _ := e.st.Counts(ctx)
	if c.Inbox["processed"] != 200 {
		b.Fatalf("counts %+v", c)
	}
	b.ReportMetric(float64(fi.Size())/1e6, "message-MB")
	b.ReportMetric(float64(before)/1024, "rss-before-MB")
	b.ReportMetric(float64(vmHWM(b))/1024, "peak-rss-MB")
}
