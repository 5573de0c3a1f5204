package poller_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/pgp/gpgtest"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
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

// BenchmarkEncryptedVsPlainIngest ingests one 835 of 60,000 sets (about
// 120 MB) from a local drop into a fresh SQLite store twice in each
// round: as it is, and as GnuPG sends it (encrypted to us, signed by the
// partner, compressed: gpg's defaults), and reports both times and their
// ratio. Goal: encrypted <= 1.3x plain.
func BenchmarkEncryptedVsPlainIngest(b *testing.B) {
	g := gpgtest.New(b)
	us, partner := g.GenKey("Riverside", "25519"), g.GenKey("Acme", "25519")
	dec, err := pgp.NewDecrypter(pgp.DecryptFiles{PrivateKeyFile: us.SecretFile, PassphraseFile: g.PassFile,
		VerifyKeyFile: partner.PublicFile}, true)
	if err != nil {
		b.Fatal(err)
	}
	plainDir, sealedDir := b.TempDir(), b.TempDir()
	plain := filepath.Join(plainDir, "big.835")
	f, _ := os.Create(plain)
	w := bufio.NewWriterSize(f, 1<<20)
	x12gen.Remit{Control: 1, SetsPerGroup: 60000, ClaimsPerSet: 8, Trace: "ENC", EOL: "\n"}.Write(w)
	w.Flush()
	fi, _ := f.Stat()
	f.Close()
	g.EncryptFile(plain, filepath.Join(sealedDir, "big.835.gpg"), us, &partner)
	sealed, _ := os.Stat(filepath.Join(sealedDir, "big.835.gpg"))
	ingest := func(dir string, decrypt *pgp.Decrypter) time.Duration {
		st := drivertest.SQLite(b)
		p := poller.New(poller.Config{Name: "bench", Directories: []string{dir}, PollInterval: time.Second,
			MaxFilesPerPoll: 10, Downloads: 1, SpoolDir: b.TempDir(), Decrypt: decrypt}, local.Source{}, st,
			inbox.Options{Routes: storetest.Routes}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		ctx := context.Background()
		p.PollOnce(ctx) // observe
		start := time.Now()
		s, err := p.PollOnce(ctx)
		took := time.Since(start)
		if err != nil || s.Ingested != 1 {
			b.Fatalf("%+v %v", s, err)
		}
		return took
	}
	var plainT, sealedT time.Duration
	for b.Loop() {
		plainT = ingest(plainDir, nil)
		sealedT = ingest(sealedDir, dec)
	}
	b.ReportMetric(float64(fi.Size())/1e6, "plain-MB")
	b.ReportMetric(float64(sealed.Size())/1e6, "message-MB")
	b.ReportMetric(plainT.Seconds(), "plain-s")
	b.ReportMetric(sealedT.Seconds(), "encrypted-s")
	b.ReportMetric(sealedT.Seconds()/plainT.Seconds(), "ratio")
}
