package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/pgp/gpgtest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestIngestDecryptsWithTheSourcesKeys: `ediwatch ingest --source acme`
// decrypts and verifies OpenPGP messages with that source's keys; the
// same document encrypted twice is one processed set and one duplicate; a
// message from a stranger is recorded as rejected and fails the command.
func TestIngestDecryptsWithTheSourcesKeys(t *testing.T) {
	g := gpgtest.New(t)
	us, acme, stranger := g.GenKey("Riverside", "rsa"), g.GenKey("Acme", "25519"), g.GenKey("Stranger", "25519")
	var doc bytes.Buffer
	x12gen.Remit{Control: 77, Trace: "CLI"}.Write(&doc)
	dir := t.TempDir()
	for name, b := range map[string][]byte{
		"a.835.gpg": g.Encrypt(doc.Bytes(), us, &acme, false),
		"b.835.asc": g.Encrypt(doc.Bytes(), us, &acme, true),
	} {
		os.WriteFile(filepath.Join(dir, name), b, 0o600)
	}
	bad := filepath.Join(t.TempDir(), "c.835")
	os.WriteFile(bad, g.Encrypt(doc.Bytes(), us, &stranger, false), 0o600)
	cfgPath := filepath.Join(t.TempDir(), "ediwatch.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`store: {driver: sqlite, dsn: %q}
sources:
  - name: acme
    type: local
    directories: [/nonexistent]
    require_encryption: true
    decrypt: {private_key_file: %q, passphrase_file: %q, verify_key_file: %q}
sinks:
  ledger: {url: "https://erp.example.test/remittances"}
  acks: {url: "https://gateway.example.test/acks"}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: acks, ack.ta1: acks}
`, "file:"+filepath.Join(t.TempDir(), "e.db"), us.SecretFile, g.PassFile, acme.PublicFile)), 0o600)
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"ingest", "--config", cfgPath, "--source", "acme", dir}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if got := out.String(); strings.Count(got, "\tprocessed\t") != 1 || strings.Count(got, "\tduplicate\t") != 1 {
		t.Errorf("ingest printed:\n%s", got)
	}
	out.Reset()
	err := run(context.Background(), []string{"ingest", "--config", cfgPath, "--source", "acme", bad}, &out, &errb)
	if err == nil || !strings.Contains(errb.String(), "signed by a key other than verify_key_file's") {
		t.Fatalf("stranger's message: %v: %s", err, errb.String())
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openStore(context.Background(), cfg.Store, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := s.Counts(context.Background())
	if c.Files["rejected"] != 1 || c.Files["ingested"] != 2 || c.Inbox["processed"] != 1 {
		t.Errorf("counts %+v", c)
	}
}
