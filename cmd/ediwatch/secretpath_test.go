package main

import (
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/poller/sftp"
)

// TestSecretPastedAsItsFilesPathIsNeverShown: a secret written where the
// path of the file holding it belongs (store.dsn_file, a sink's
// secret_file and header_files, a source's key, passphrase and password
// files, the console's token files, an OpenPGP key and its passphrase)
// is refused by the setting's name, and the refusal, which reaches the
// logs, does not show it.
func TestSecretPastedAsItsFilesPathIsNeverShown(t *testing.T) {
	const secret = "hunter2-Zq8vX3"
	var errs []error
	_, err := config.Store{DSNFile: "postgres://app:" + secret + "@db/ediwatch"}.ResolveDSN()
	errs = append(errs, err)
	_, err = buildSink("erp", config.Sink{URL: "https://erp.example.test/r", SecretFile: "whsec_" + secret})
	errs = append(errs, err)
	_, err = buildSink("erp", config.Sink{URL: "https://erp.example.test/r",
		HeaderFiles: map[string]string{"Authorization": "Bearer " + secret}})
	errs = append(errs, err)
	for _, c := range []sftp.Config{
		{Address: "127.0.0.1:22", User: "u", PasswordFile: secret, KnownHostsFile: "/dev/null"},
		{Address: "127.0.0.1:22", User: "u", PrivateKeyFile: "-----BEGIN OPENSSH PRIVATE KEY-----" + secret,
			KnownHostsFile: "/dev/null"},
	} {
		_, err = sftp.New(c)
		errs = append(errs, err)
	}
	_, err = console.ReadToken(secret)
	errs = append(errs, err)
	_, err = pgp.NewDecrypter(pgp.DecryptFiles{PrivateKeyFile: "-----BEGIN PGP PRIVATE KEY BLOCK-----" + secret}, false)
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Errorf("case %d: no error", i)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("case %d shows the secret: %v", i, err)
		}
		if !strings.Contains(err.Error(), "no such file") {
			t.Errorf("case %d does not say why: %v", i, err)
		}
	}
}
