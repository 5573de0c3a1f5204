package pgp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// bigEnv, set to a number of megabytes (bench scripts use 200), adds a
// message of that size to TestDecryptMemoryDoesNotGrowWithSize.
const bigEnv = "EDIWATCH_PGP_BIG_MB"

// goKeys makes our key and the partner's with go-crypto (Curve25519) and
// writes the files a source names.
func goKeys(t testing.TB) (files pgp.DecryptFiles, us, partner *openpgp.Entity) {
	t.Helper()
	// Compression among the keys' preferences, as GnuPG's keys have it:
	// go-crypto compresses only what the recipient accepts.
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, DefaultCompressionAlgo: packet.CompressionZLIB}
	us, err := openpgp.NewEntity("Riverside", "", "riverside@example.test", cfg)
	if err != nil {
		t.Fatal(err)
	}
	partner, err = openpgp.NewEntity("Acme", "", "acme@example.test", cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files = pgp.DecryptFiles{PrivateKeyFile: filepath.Join(dir, "us.gpg"), VerifyKeyFile: filepath.Join(dir, "acme.gpg")}
	write := func(p string, fn func(io.Writer) error) {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write(files.PrivateKeyFile, func(w io.Writer) error { return us.SerializePrivate(w, nil) })
	write(files.VerifyKeyFile, partner.Serialize)
	return files, us, partner
}

// encryptedRemit writes an 835 of about mb megabytes (x12gen), encrypted
// to us and signed by partner, compressed as GnuPG does, to a file.
func encryptedRemit(t testing.TB, mb int, us, partner *openpgp.Entity) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), fmt.Sprintf("remit%d.835.gpg", mb))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := openpgp.Encrypt(bw, openpgp.EntityList{us}, partner, &openpgp.FileHints{IsBinary: true},
		&packet.Config{DefaultCompressionAlgo: packet.CompressionZLIB,
			CompressionConfig: &packet.CompressionConfig{Level: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// About 300 bytes per claim of 2 lines: a set of about 1 MB.
	r := x12gen.Remit{SetsPerGroup: mb, ClaimsPerSet: 3500, LinesPerClaim: 2}.Reader()
	defer r.Close()
	if _, err := io.Copy(w, r); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

// peakHeap runs fn while sampling the heap, and returns the highest
// HeapAlloc seen above what it was before.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var s runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&s)
			peak = max(peak, s.HeapAlloc)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// TestDecryptMemoryDoesNotGrowWithSize: decrypting, decompressing and
// verifying a message into the spool takes a peak heap that does not
// depend on its size (a 60 MB plaintext within a constant of a 20 MB
// one, both within a bound), measured by sampling runtime.MemStats.
func TestDecryptMemoryDoesNotGrowWithSize(t *testing.T) {
	files, us, partner := goKeys(t)
	d, err := pgp.NewDecrypter(files, true)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{20, 60}
	if v, err := strconv.Atoi(os.Getenv(bigEnv)); err == nil && v > 0 {
		sizes = append(sizes, v)
	}
	const bound = 24 << 20 // bytes of heap above the baseline
	const spread = 6 << 20 // between sizes
	var peaks []uint64
	for _, mb := range sizes {
		msg := encryptedRemit(t, mb, us, partner)
		f, err := os.Open(msg)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		msgSize := fi.Size()
		if msgSize > int64(mb)<<20/4 {
			t.Fatalf("message of %d bytes: not compressed", msgSize)
		}
		var size int64
		peak := peakHeap(func() {
			pt, n, err := d.Spool(context.Background(), f, t.TempDir())
			if err != nil {
				t.Error(err)
				return
			}
			size = n
			pt.Close()
		})
		f.Close()
		os.Remove(msg)
		t.Logf("%d MB plaintext (%d bytes, message %d): peak heap %.1f MB above baseline", mb, size, msgSize,
			float64(peak)/(1<<20))
		if size < int64(mb)<<20*9/10 {
			t.Fatalf("plaintext of %d bytes, want about %d MB", size, mb)
		}
		if peak > bound {
			t.Errorf("%d MB: peak heap %d bytes, over the bound of %d", mb, peak, bound)
		}
		peaks = append(peaks, peak)
	}
	for i := 1; i < len(peaks); i++ {
		if peaks[i] > peaks[0]+spread {
			t.Errorf("peak heap grows with size: %d MB %d bytes, %d MB %d bytes", sizes[0], peaks[0], sizes[i], peaks[i])
		}
	}
}
