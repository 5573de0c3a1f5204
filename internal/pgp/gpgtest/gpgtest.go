// Package gpgtest makes keys and messages with GnuPG (the gpg binary, as
// partners run it) for tests. Without gpg a test is skipped, except under
// CI=true, where it fails: CI installs gnupg (scripts/services.sh).
package gpgtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Passphrase protects every key a GPG makes.
const Passphrase = "correct horse battery staple"

// GPG is one GnuPG home directory.
type GPG struct {
	t    testing.TB
	Home string
	// PassFile holds Passphrase.
	PassFile string
}

// New returns a GPG with a fresh home directory, its agent stopped when
// t ends.
func New(t testing.TB) *GPG {
	t.Helper()
	if _, err := exec.LookPath("gpg"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("gpg not found (install gnupg; scripts/services.sh does): %v", err)
		}
		t.Skip("gpg not installed")
	}
	// A short path: the agent's socket name must fit a sun_path.
	home, err := os.MkdirTemp("", "gpg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	g := &GPG{t: t, Home: home, PassFile: filepath.Join(home, "pass")}
	if err := os.WriteFile(g.PassFile, []byte(Passphrase+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The agent otherwise calibrates the passphrase's key derivation for
	// seconds per key: a test's keys need no such strength.
	if err := os.WriteFile(filepath.Join(home, "gpg-agent.conf"), []byte("s2k-count 65536\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// Close stops the home directory's agent and removes the directory.
func (g *GPG) Close() {
	exec.Command("gpgconf", "--homedir", g.Home, "--kill", "all").Run()
	os.RemoveAll(g.Home)
}

// Run runs gpg in batch mode with the passphrase file and stdin, and
// returns its standard output.
func (g *GPG) Run(stdin []byte, args ...string) []byte {
	g.t.Helper()
	base := []string{"--batch", "--yes", "--no-tty", "--quiet", "--homedir", g.Home, "--pinentry-mode", "loopback",
		"--passphrase-file", g.PassFile, "--trust-model", "always", "--no-auto-check-trustdb"}
	cmd := exec.Command("gpg", append(base, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		g.t.Fatalf("gpg %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

// Key is a key pair made by GenKey.
type Key struct {
	UID, Fingerprint string
	// PublicFile and SecretFile hold the exported keys (armored).
	PublicFile, SecretFile string
}

// GenKey makes a key pair: algo "rsa" (RSA 2048: a signing primary key,
// an encryption subkey) or "25519" (ed25519 primary, cv25519 subkey), and
// exports it into the home directory.
func (g *GPG) GenKey(name, algo string) Key {
	g.t.Helper()
	sign, encr := "rsa2048", "rsa2048"
	if algo == "25519" {
		sign, encr = "ed25519", "cv25519"
	}
	uid := name + " <" + strings.ToLower(name) + "@example.test>"
	g.Run(nil, "--quick-gen-key", uid, sign, "sign", "never")
	out := g.Run(nil, "--with-colons", "--list-keys", uid)
	var fpr string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Split(line, ":"); len(f) > 9 && f[0] == "fpr" {
			fpr = f[9]
			break
		}
	}
	if fpr == "" {
		g.t.Fatalf("gpg: no fingerprint for %s", uid)
	}
	g.Run(nil, "--quick-add-key", fpr, encr, "encr", "never")
	k := Key{UID: uid, Fingerprint: fpr, PublicFile: filepath.Join(g.Home, name+".pub.asc"),
		SecretFile: filepath.Join(g.Home, name+".sec.asc")}
	if err := os.WriteFile(k.PublicFile, g.Run(nil, "--armor", "--export", fpr), 0o600); err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(k.SecretFile, g.Run(nil, "--armor", "--export-secret-keys", fpr), 0o600); err != nil {
		g.t.Fatal(err)
	}
	return k
}

// Encrypt encrypts plain to the key to, signed by signer unless it is
// nil, armored or binary.
func (g *GPG) Encrypt(plain []byte, to Key, signer *Key, armored bool) []byte {
	g.t.Helper()
	args := []string{"--recipient", to.Fingerprint}
	if armored {
		args = append(args, "--armor")
	}
	if signer != nil {
		args = append(args, "--local-user", signer.Fingerprint, "--sign")
	}
	return g.Run(plain, append(args, "--encrypt")...)
}

// EncryptFile encrypts the file in to the file out (a large file never
// passes through the test's memory).
func (g *GPG) EncryptFile(in, out string, to Key, signer *Key) {
	g.t.Helper()
	args := []string{"--recipient", to.Fingerprint, "--output", out}
	if signer != nil {
		args = append(args, "--local-user", signer.Fingerprint, "--sign")
	}
	g.Run(nil, append(args, "--encrypt", in)...)
}

// Sign makes a message signed by signer, not encrypted.
func (g *GPG) Sign(plain []byte, signer Key) []byte {
	g.t.Helper()
	return g.Run(plain, "--local-user", signer.Fingerprint, "--sign")
}

// Decrypt decrypts (and checks the signature of) a message made for one
// of this home's keys.
func (g *GPG) Decrypt(msg []byte) []byte {
	g.t.Helper()
	return g.Run(msg, "--decrypt")
}
