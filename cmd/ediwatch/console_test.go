package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/config"
)

// TestRunServesTheConsoleOnItsOwnListener: with console.listen set, run
// serves the console (bearer auth, strict headers) on a listener apart
// from /metrics, and stops it with the daemon.
func TestRunServesTheConsoleOnItsOwnListener(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "viewer"), []byte("viewer-secret\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "admin"), []byte("admin-secret\n"), 0o600)
	cfg := config.Default()
	cfg.Store.DSN = filepath.Join(dir, "e.db")
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Console = config.Console{Listen: "127.0.0.1:0", TokenFile: filepath.Join(dir, "viewer"),
		AdminTokenFile: filepath.Join(dir, "admin")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *daemon, 1)
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, cfg, zap.NewNop(), func(d *daemon) { started <- d }) }()
	var d *daemon
	select {
	case d = <-started:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	if d.console == nil || d.console.String() == d.addr.String() {
		t.Fatalf("console at %v, metrics at %v", d.console, d.addr)
	}
	get := func(base, path, token string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", "http://"+base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get(d.console.String(), "/sinks", "admin-secret")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Sinks") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("console /sinks: %s", resp.Status)
	}
	if resp, _ := get(d.console.String(), "/", "wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %s", resp.Status)
	}
	if resp, _ := get(d.addr.String(), "/dlq", "admin-secret"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the console on the metrics listener: %s", resp.Status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run stopped with %v", err)
	}
}

// TestRunRefusesAPlainConsoleOffLoopback: run refuses to start a console
// on an address other than loopback without TLS, naming the fix, even
// when the configuration skipped validation; an empty token file is
// refused too.
func TestRunRefusesAPlainConsoleOffLoopback(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "viewer"), []byte("viewer-secret\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600)
	cfg := config.Default()
	cfg.Store.DSN = filepath.Join(dir, "e.db")
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Console = config.Console{Listen: "0.0.0.0:0", TokenFile: filepath.Join(dir, "viewer")}
	err := runDaemon(context.Background(), cfg, zap.NewNop(), nil)
	if err == nil || !strings.Contains(err.Error(), "console.tls_cert_file") {
		t.Errorf("plain console on 0.0.0.0: %v", err)
	}
	cfg.Console = config.Console{Listen: "127.0.0.1:0", TokenFile: filepath.Join(dir, "empty")}
	err = runDaemon(context.Background(), cfg, zap.NewNop(), nil)
	if err == nil || !strings.Contains(err.Error(), "console.token_file") {
		t.Errorf("empty token file: %v", err)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// to dir, returning their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ediwatch console test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "console.crt"), filepath.Join(dir, "console.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestRunServesTheConsoleOverTLSWithSecureCookies: with a certificate the
// console serves HTTPS only, its session cookie is Secure and responses
// carry HSTS.
func TestRunServesTheConsoleOverTLSWithSecureCookies(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "viewer"), []byte("viewer-secret\n"), 0o600)
	certFile, keyFile, pool := selfSigned(t, dir)
	cfg := config.Default()
	cfg.Store.DSN = filepath.Join(dir, "e.db")
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Console = config.Console{Listen: "127.0.0.1:0", TokenFile: filepath.Join(dir, "viewer"), TLSCertFile: certFile,
		TLSKeyFile: keyFile}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *daemon, 1)
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, cfg, zap.NewNop(), func(d *daemon) { started <- d }) }()
	var d *daemon
	select {
	case d = <-started:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm("https://"+d.console.String()+"/signin", url.Values{"token": {"viewer-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cks := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cks) != 1 || !cks[0].Secure || !cks[0].HttpOnly ||
		cks[0].SameSite != http.SameSiteStrictMode || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Errorf("sign-in over TLS: %s, cookies %v, HSTS %q", resp.Status, cks, resp.Header.Get("Strict-Transport-Security"))
	}
	if resp, err := http.Get("http://" + d.console.String() + "/signin"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the TLS console answered plain HTTP")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run stopped with %v", err)
	}
}
