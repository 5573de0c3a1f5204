package pgp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/pgp/gpgtest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// keys are a test's keys, made by GnuPG: ours, the partner's, a
// stranger's, RSA and Curve25519.
type keys struct {
	g                   *gpgtest.GPG
	usRSA, acmeRSA      gpgtest.Key
	us25519, acme25519  gpgtest.Key
	strangerForSigning  gpgtest.Key
	strangerForEncrypts gpgtest.Key
}

func gpgKeys(t *testing.T) *keys {
	t.Helper()
	g := gpgtest.New(t)
	k := &keys{g: g}
	k.usRSA, k.us25519 = g.GenKey("Riverside", "rsa"), g.GenKey("Riverside25519", "25519")
	k.acmeRSA, k.acme25519 = g.GenKey("Acme", "rsa"), g.GenKey("Acme25519", "25519")
	k.strangerForSigning = g.GenKey("Stranger", "25519")
	k.strangerForEncrypts = k.strangerForSigning
	return k
}

func remit(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 3, ClaimsPerSet: 4, EOL: "\n"}).Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decrypter(t *testing.T, ours, partner *gpgtest.Key, passFile string, require bool) *pgp.Decrypter {
	t.Helper()
	f := pgp.DecryptFiles{PrivateKeyFile: ours.SecretFile, PassphraseFile: passFile}
	if partner != nil {
		f.VerifyKeyFile = partner.PublicFile
	}
	d, err := pgp.NewDecrypter(f, require)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func decrypt(d *pgp.Decrypter, msg []byte) ([]byte, error) {
	var out bytes.Buffer
	err := d.Decrypt(&out, bytes.NewReader(msg))
	return out.Bytes(), err
}

// TestDecryptsWhatGnuPGSignedAndEncrypted: binary and armored messages,
// RSA and Curve25519 keys, signed by the partner, come out as the
// plaintext.
func TestDecryptsWhatGnuPGSignedAndEncrypted(t *testing.T) {
	k := gpgKeys(t)
	plain := remit(t)
	for _, c := range []struct {
		name     string
		us, acme gpgtest.Key
	}{{"rsa", k.usRSA, k.acmeRSA}, {"curve25519", k.us25519, k.acme25519}} {
		for _, armored := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "/binary", true: "/armored"}[armored], func(t *testing.T) {
				msg := k.g.Encrypt(plain, c.us, &c.acme, armored)
				if !pgp.IsMessage(msg[:64]) {
					t.Fatalf("not recognised as a message: % x", msg[:8])
				}
				d := decrypter(t, &c.us, &c.acme, k.g.PassFile, true)
				got, err := decrypt(d, msg)
				if err != nil {
					t.Fatalf("decrypt: %v", err)
				}
				if !bytes.Equal(got, plain) {
					t.Fatalf("plaintext differs (%d bytes, want %d)", len(got), len(plain))
				}
			})
		}
	}
}

// TestRefusalsNameTheirReason: each way a message can fail is refused
// with its own reason.
func TestRefusalsNameTheirReason(t *testing.T) {
	k := gpgKeys(t)
	plain := remit(t)
	big := bytes.Repeat(plain, 200) // several hundred KB: a corruption lands mid-stream
	d := decrypter(t, &k.usRSA, &k.acmeRSA, k.g.PassFile, true)
	corrupt := k.g.Encrypt(big, k.usRSA, &k.acmeRSA, false)
	corrupt[len(corrupt)/2] ^= 0x55
	armoredCorrupt := k.g.Encrypt(big, k.usRSA, &k.acmeRSA, true)
	mid := len(armoredCorrupt) / 2
	for armoredCorrupt[mid] == '\n' || armoredCorrupt[mid] == 'A' {
		mid++
	}
	armoredCorrupt[mid] = 'A'
	whole := k.g.Encrypt(big, k.usRSA, &k.acmeRSA, false)
	armoredWhole := k.g.Encrypt(big, k.usRSA, &k.acmeRSA, true)
	// Signed by the partner, not encrypted nor compressed, a byte of the
	// content changed: the signature no longer verifies.
	altered := k.g.Run(plain, "--compress-algo", "none", "--local-user", k.acmeRSA.Fingerprint, "--sign")
	at := bytes.Index(altered, []byte("CLP*"))
	if at < 0 {
		t.Fatal("literal data not found in the signed message")
	}
	altered[at+5] ^= 0x01
	lenient := decrypter(t, &k.usRSA, &k.acmeRSA, k.g.PassFile, false)
	for _, c := range []struct {
		name, reason string
		msg          []byte
		d            *pgp.Decrypter
	}{
		{"encrypted to another key", pgp.ReasonWrongKey, k.g.Encrypt(plain, k.strangerForEncrypts, &k.acmeRSA, false), d},
		{"signed by a stranger", pgp.ReasonUnknownSigner, k.g.Encrypt(plain, k.usRSA, &k.strangerForSigning, false), d},
		{"signed by ourselves", pgp.ReasonUnknownSigner, k.g.Encrypt(plain, k.usRSA, &k.usRSA, false), d},
		{"unsigned when verify is required", pgp.ReasonUnsigned, k.g.Encrypt(plain, k.usRSA, nil, false), d},
		{"corrupted mid-stream", pgp.ReasonCorrupt, corrupt, d},
		{"armor corrupted mid-stream", pgp.ReasonCorrupt, armoredCorrupt, d},
		{"cut off", pgp.ReasonCorrupt, whole[:len(whole)*2/3], d},
		{"cut off early", pgp.ReasonCorrupt, whole[:len(whole)/10], d},
		{"cut off armored", pgp.ReasonCorrupt, armoredWhole[:len(armoredWhole)/2], d},
		{"signed, not encrypted, on require_encryption", pgp.ReasonNotEncrypted, k.g.Sign(plain, k.acmeRSA), d},
		{"plaintext on require_encryption", pgp.ReasonNotEncrypted, plain, d},
		{"corrupt without verify", pgp.ReasonCorrupt, corrupt, decrypter(t, &k.usRSA, nil, k.g.PassFile, false)},
		{"content altered after signing", pgp.ReasonBadSignature, altered, lenient},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decrypt(c.d, c.msg)
			if got := pgp.ReasonOf(err); got != c.reason {
				t.Fatalf("reason %q (%v), want %q", got, err, c.reason)
			}
			// Only a message that ends early is cut off (a later poll
			// may find it whole); damage inside one is corrupt at once.
			if got, want := pgp.IsCutOff(err), strings.HasPrefix(c.name, "cut off"); got != want {
				t.Errorf("cut off %v (%v), want %v", got, err, want)
			}
			// Neither plaintext nor a passphrase in the message.
			if strings.Contains(err.Error(), "CLP") || strings.Contains(err.Error(), gpgtest.Passphrase) {
				t.Errorf("error holds content: %v", err)
			}
		})
	}
}

// TestSpoolKeepsPlaintextInAnUnlinkedFile: a message becomes an unlinked
// spool file of the plaintext; plaintext passes as it is unless
// encryption is required; a refused message leaves nothing behind.
func TestSpoolKeepsPlaintextInAnUnlinkedFile(t *testing.T) {
	k := gpgKeys(t)
	plain := remit(t)
	dir, spoolDir := t.TempDir(), t.TempDir()
	write := func(name string, b []byte) *os.File {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	d := decrypter(t, &k.us25519, &k.acme25519, k.g.PassFile, false)
	enc := write("a.835", k.g.Encrypt(plain, k.us25519, &k.acme25519, true))
	pt, n, err := d.Spool(context.Background(), enc, spoolDir)
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	if pt == enc || n != int64(len(plain)) {
		t.Fatalf("spool %v of %d bytes", pt == enc, n)
	}
	got, _ := os.ReadFile("/proc/self/fd/" + strconv.Itoa(int(pt.Fd())))
	if !bytes.Equal(got, plain) {
		t.Error("spool does not hold the plaintext")
	}
	if names, _ := os.ReadDir(spoolDir); len(names) != 0 {
		t.Errorf("spool dir holds %d files: the plaintext is linked", len(names))
	}
	clear := write("b.835", plain)
	noVerify := decrypter(t, &k.us25519, nil, k.g.PassFile, false)
	if f, n, err := noVerify.Spool(context.Background(), clear, spoolDir); err != nil || f != clear || n != int64(len(plain)) {
		t.Errorf("plaintext: %v %d %v", f == clear, n, err)
	}
	// verify_key_file requires a signature: plaintext (unsigned by
	// definition, a cleartext-signed file included) is no way around it.
	cleartext := write("s.835", k.g.Run(plain, "--local-user", k.acme25519.Fingerprint, "--clearsign"))
	for _, f := range []*os.File{clear, cleartext} {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if pt, _, err := d.Spool(context.Background(), f, spoolDir); pgp.ReasonOf(err) != pgp.ReasonUnsigned {
			if err == nil && pt != f {
				pt.Close()
			}
			t.Errorf("%s with verify_key_file: %v, want %s", filepath.Base(f.Name()), err, pgp.ReasonUnsigned)
		}
	}
	if _, err := clear.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	dr := decrypter(t, &k.us25519, &k.acme25519, k.g.PassFile, true)
	if _, _, err := dr.Spool(context.Background(), clear, spoolDir); pgp.ReasonOf(err) != pgp.ReasonNotEncrypted {
		t.Errorf("plaintext on require_encryption: %v", err)
	}
	bad := write("c.835", k.g.Encrypt(plain, k.us25519, &k.strangerForSigning, false))
	if _, _, err := d.Spool(context.Background(), bad, spoolDir); pgp.ReasonOf(err) != pgp.ReasonUnknownSigner {
		t.Errorf("stranger: %v", err)
	}
	if names, _ := os.ReadDir(spoolDir); len(names) != 0 {
		t.Errorf("spool dir holds %d files after a refusal", len(names))
	}
}

// TestIsMessageByContent: X12 (with a byte-order mark, white space) is
// not a message; armor and binary packets are, whatever the name.
func TestIsMessageByContent(t *testing.T) {
	for _, c := range []struct {
		head string
		want bool
	}{
		{"ISA*00*          *00*", false},
		{"\xef\xbb\xbfISA*00*", false},
		{"\r\n  ISA*00*", false},
		{"", false},
		{"\n-----BEGIN PGP MESSAGE-----\n", true},
		{"-----BEGIN PGP SIGNATURE-----\n", false},
		{"\x85\x01\x0c\x03", true}, // old-format public-key encrypted session key
		{"\xc1\xc0\x4c\x03", true}, // new-format, tag 1
		{"\xa3\x01", true},         // old-format compressed data
		{"\xc6\x00", false},        // new-format public key (tag 6): a key, not a message
	} {
		if got := pgp.IsMessage([]byte(c.head)); got != c.want {
			t.Errorf("IsMessage(%q) = %v, want %v", c.head, got, c.want)
		}
	}
}

// TestSealedFilesOpenInGnuPG: what an SFTP sink sends (encrypted to the
// partner, signed with our key) is decrypted and verified by GnuPG.
func TestSealedFilesOpenInGnuPG(t *testing.T) {
	k := gpgKeys(t)
	for _, c := range []struct {
		name     string
		us, acme gpgtest.Key
	}{{"rsa", k.usRSA, k.acmeRSA},
		{"curve25519", k.us25519, k.acme25519}} {
		t.Run(c.name, func(t *testing.T) {
			e, err := pgp.NewEncrypter(c.acme.PublicFile, pgp.SignFiles{PrivateKeyFile: c.us.SecretFile,
				PassphraseFile: k.g.PassFile})
			if err != nil {
				t.Fatal(err)
			}
			body := []byte("ISA*00*          *00*          *ZZ*RIVERSIDE      *ZZ*ACMEHP         *...~")
			sealed, err := e.Seal(body)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(sealed, []byte("RIVERSIDE")) || !pgp.IsMessage(sealed) {
				t.Fatal("not sealed")
			}
			if got := k.g.Run(sealed, "--require-secmem", "--decrypt"); !bytes.Equal(got, body) {
				t.Fatalf("gpg decrypted %q", got)
			}
			// And the signature is ours: verified by our own decrypter as
			// the partner would.
			d := decrypter(t, &c.acme, &c.us, k.g.PassFile, true)
			if got, err := decrypt(d, sealed); err != nil || !bytes.Equal(got, body) {
				t.Fatalf("verify: %v", err)
			}
		})
	}
}

// TestWrongPassphraseIsAConfigError: a key that does not unlock is an
// error at start, naming the file, not the passphrase.
func TestWrongPassphraseIsAConfigError(t *testing.T) {
	k := gpgKeys(t)
	bad := filepath.Join(t.TempDir(), "pass")
	os.WriteFile(bad, []byte("not it\n"), 0o600)
	_, err := pgp.NewDecrypter(pgp.DecryptFiles{PrivateKeyFile: k.usRSA.SecretFile, PassphraseFile: bad}, false)
	if err == nil || !strings.Contains(err.Error(), "private_key_file") || strings.Contains(err.Error(), "not it") {
		t.Fatalf("err = %v", err)
	}
	_, err = pgp.NewDecrypter(pgp.DecryptFiles{PrivateKeyFile: k.usRSA.PublicFile}, false)
	if err == nil || !strings.Contains(err.Error(), "public key only") {
		t.Fatalf("public key as private: %v", err)
	}
}

// TestCancelledSpoolIsNoRefusal: a decryption stopped by its context
// (the daemon shutting down) returns the context's error, not a reason
// that would reject the file.
func TestCancelledSpoolIsNoRefusal(t *testing.T) {
	k := gpgKeys(t)
	p := filepath.Join(t.TempDir(), "a.835.gpg")
	os.WriteFile(p, k.g.Encrypt(remit(t), k.us25519, &k.acme25519, false), 0o600)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := decrypter(t, &k.us25519, &k.acme25519, k.g.PassFile, true)
	if _, _, err := d.Spool(ctx, f, t.TempDir()); !errors.Is(err, context.Canceled) || pgp.ReasonOf(err) != "" {
		t.Fatalf("err = %v (reason %q)", err, pgp.ReasonOf(err))
	}
}

// TestSignatureFromAKeyExpiredSince follows GnuPG: a message the
// partner's key signed while it was valid verifies after the key expired,
// with a warning naming the key and the time ("Good signature ...
// [expired]"); one signed after the key had expired is refused, as
// key_expired. The key (made in 2020, set to expire in 2021) and both
// signatures are GnuPG's, made at faked times.
func TestSignatureFromAKeyExpiredSince(t *testing.T) {
	k := gpgKeys(t)
	g := k.g
	at := func(ts string, args ...string) []byte {
		return g.Run(remit(t), append([]string{"--faked-system-time", ts + "!"}, args...)...)
	}
	uid := "Old Partner <old@example.test>"
	g.Run(nil, "--faked-system-time", "20200101T000000!", "--quick-gen-key", uid, "ed25519", "sign", "never")
	var fpr string
	for _, line := range strings.Split(string(g.Run(nil, "--with-colons", "--list-keys", uid)), "\n") {
		if f := strings.Split(line, ":"); len(f) > 9 && f[0] == "fpr" {
			fpr = f[9]
			break
		}
	}
	whileValid := at("20200601T000000", "--local-user", fpr, "--sign")
	afterExpiry := at("20220601T000000", "--local-user", fpr, "--sign")
	g.Run(nil, "--faked-system-time", "20200102T000000!", "--quick-set-expire", fpr, "1y")
	old := gpgtest.Key{UID: uid, Fingerprint: fpr, PublicFile: filepath.Join(g.Home, "old.pub.asc")}
	if err := os.WriteFile(old.PublicFile, g.Run(nil, "--armor", "--export", fpr), 0o600); err != nil {
		t.Fatal(err)
	}
	d := decrypter(t, &k.usRSA, &old, k.g.PassFile, false)

	var warnings []string
	var out bytes.Buffer
	err := d.DecryptWarn(&out, bytes.NewReader(whileValid), func(m string) { warnings = append(warnings, m) })
	if err != nil || !bytes.Equal(out.Bytes(), remit(t)) {
		t.Fatalf("signed while the key was valid: %v (%d bytes)", err, out.Len())
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "expired since") || !strings.Contains(warnings[0], "2020-06-01") {
		t.Errorf("warnings %q, want one saying the key expired since the 2020-06-01 signature", warnings)
	}
	warnings = nil
	_, err = decrypt(d, afterExpiry)
	if pgp.ReasonOf(err) != pgp.ReasonKeyExpired || !strings.Contains(err.Error(), "2022-06-01") {
		t.Errorf("signed after the key expired: %v, want key_expired naming the time", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q for a refused message", warnings)
	}
}

// TestSignedOnlyMessageCutOffWaits: `gpg --sign` writes its compressed
// packet with an indeterminate length, which no length completes: such a
// message cut in half may be an upload still under way, and is cut off
// (a later poll finds it whole), never refused at once as damaged.
func TestSignedOnlyMessageCutOffWaits(t *testing.T) {
	k := gpgKeys(t)
	signed := k.g.Sign(bytes.Repeat(remit(t), 50), k.acmeRSA)
	d := decrypter(t, &k.usRSA, &k.acmeRSA, k.g.PassFile, false)
	if _, err := decrypt(d, signed); err != nil {
		t.Fatalf("the whole message: %v", err)
	}
	_, err := decrypt(d, signed[:len(signed)/2])
	if pgp.ReasonOf(err) != pgp.ReasonCorrupt || !pgp.IsCutOff(err) {
		t.Errorf("a signed message cut in half: %v (cut off %v), want corrupt and cut off", err, pgp.IsCutOff(err))
	}
}
