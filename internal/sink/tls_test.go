package sink

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
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate of ca for name (a server's, for 127.0.0.1,
// or a client's) and its key, both PEM.
func (ca *testCA) issue(t *testing.T, name string, server bool, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// mtlsReceiver is an HTTPS receiver whose certificate serverCA issued and
// which requires a client certificate clientCA issued; it records the
// common name of every client that reached it.
type mtlsReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	clients []string
}

func newMTLSReceiver(t *testing.T, serverCA, clientCA *testCA) *mtlsReceiver {
	t.Helper()
	certPEM, keyPEM := serverCA.issue(t, "receiver", true, 2)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
	r := &mtlsReceiver{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.clients = append(r.clients, req.TLS.PeerCertificates[0].Subject.CommonName)
		r.mu.Unlock()
	}))
	r.Server.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: pool, MinVersion: tls.VersionTLS12}
	r.Server.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	r.StartTLS()
	t.Cleanup(r.Close)
	return r
}

func (r *mtlsReceiver) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.clients...)
}

// writeFile writes b to dir/name by renaming a temporary file over it,
// as a certificate renewal would, and returns the path.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
	return p
}

func tlsSink(t *testing.T, url string, f TLSFiles) *HTTP {
	t.Helper()
	cfg, err := ClientTLS(f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Name: "erp", URL: url, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func deliverOne(h *HTTP) Result {
	return h.Deliver(context.Background(), Message{EffectKey: "payment:1:T1", Kind: "payment.posted",
		Payload: []byte(`{"amount":"1.00"}`)}, time.Now())
}

// TestMutualTLS: a receiver behind a private CA that requires a client
// certificate gets the row from a sink given the CA and a certificate
// (tls.ca_file, cert_file, key_file); a sink without the certificate, or
// one trusting another CA, reaches no handler and retries.
func TestMutualTLS(t *testing.T) {
	serverCA, clientCA, otherCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "other CA")
	recv := newMTLSReceiver(t, serverCA, clientCA)
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.pem", serverCA.pem)
	other := writeFile(t, dir, "other.pem", otherCA.pem)
	certPEM, keyPEM := clientCA.issue(t, "ediwatch-erp", false, 3)
	cert, key := writeFile(t, dir, "client.crt", certPEM), writeFile(t, dir, "client.key", keyPEM)

	if res := deliverOne(tlsSink(t, recv.URL+"/in", TLSFiles{CAFile: ca, CertFile: cert, KeyFile: key})); res.Outcome != Delivered {
		t.Fatalf("with the CA and the client certificate: %v %q", res.Outcome, res.Err)
	}
	if got := recv.seen(); len(got) != 1 || got[0] != "ediwatch-erp" {
		t.Fatalf("clients seen %v", got)
	}
	res := deliverOne(tlsSink(t, recv.URL+"/in", TLSFiles{CAFile: ca}))
	if res.Outcome != Retry || res.Status != 0 {
		t.Errorf("without a client certificate: %v %d %q", res.Outcome, res.Status, res.Err)
	}
	res = deliverOne(tlsSink(t, recv.URL+"/in", TLSFiles{CAFile: other, CertFile: cert, KeyFile: key}))
	if res.Outcome != Retry || !strings.Contains(res.Err, "certificate") {
		t.Errorf("trusting another CA: %v %q", res.Outcome, res.Err)
	}
	if got := recv.seen(); len(got) != 1 {
		t.Errorf("refused sinks reached the handler: %v", got)
	}
}

// TestRenewedClientCertificateIsUsedWithoutRestart: the client
// certificate's files replaced (a renewal) are read at the next
// connection's handshake; while only one of the two is replaced, the
// pair before is still presented.
func TestRenewedClientCertificateIsUsedWithoutRestart(t *testing.T) {
	serverCA, clientCA := newTestCA(t, "server CA"), newTestCA(t, "client CA")
	recv := newMTLSReceiver(t, serverCA, clientCA)
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.pem", serverCA.pem)
	oldCert, oldKey := clientCA.issue(t, "erp-2026", false, 3)
	cert, key := writeFile(t, dir, "client.crt", oldCert), writeFile(t, dir, "client.key", oldKey)
	h := tlsSink(t, recv.URL+"/in", TLSFiles{CAFile: ca, CertFile: cert, KeyFile: key})
	deliverNew := func() {
		t.Helper()
		recv.CloseClientConnections() // the next delivery's connection is new: a handshake
		if res := deliverOne(h); res.Outcome != Delivered {
			t.Fatalf("%v %q", res.Outcome, res.Err)
		}
	}
	deliverNew()
	newCert, newKey := clientCA.issue(t, "erp-2027", false, 4)
	time.Sleep(10 * time.Millisecond) // a modification time of its own
	writeFile(t, dir, "client.crt", newCert)
	deliverNew() // the new certificate with the old key: the old pair
	writeFile(t, dir, "client.key", newKey)
	deliverNew()
	if got := recv.seen(); strings.Join(got, " ") != "erp-2026 erp-2026 erp-2027" {
		t.Errorf("clients seen %v, want erp-2026 twice (the second while half-renewed), then erp-2027", got)
	}
}

// TestClientTLSErrorsNameFilesNotContent: a missing or unreadable file,
// a CA file without a certificate and a key that does not match its
// certificate are refused by setting; nothing of a key, nor a key pasted
// where its path belongs, reaches the message.
func TestClientTLSErrorsNameFilesNotContent(t *testing.T) {
	ca := newTestCA(t, "CA")
	dir := t.TempDir()
	certPEM, keyPEM := ca.issue(t, "erp", false, 2)
	_, otherKey := ca.issue(t, "erp", false, 3)
	cert, key := writeFile(t, dir, "c.crt", certPEM), writeFile(t, dir, "c.key", keyPEM)
	wrong := writeFile(t, dir, "wrong.key", otherKey)
	notCA := writeFile(t, dir, "notca.pem", []byte("hunter2\n"))
	for _, tc := range []struct {
		name string
		f    TLSFiles
		want string
	}{
		{"missing CA", TLSFiles{CAFile: filepath.Join(dir, "none.pem")}, "ca_file"},
		{"CA without a certificate", TLSFiles{CAFile: notCA}, "no PEM certificate"},
		{"certificate without key", TLSFiles{CertFile: cert}, "go together"},
		{"key of another certificate", TLSFiles{CertFile: cert, KeyFile: wrong}, "does not match"},
		{"a key pasted as its path", TLSFiles{CertFile: cert, KeyFile: "-----BEGIN EC PRIVATE KEY-----hunter2"}, "no such file"},
		{"key file missing", TLSFiles{CertFile: cert, KeyFile: filepath.Join(dir, "none.key")}, "no such file"},
	} {
		_, err := ClientTLS(tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
			continue
		}
		for _, secret := range []string{"hunter2", "PRIVATE KEY", string(otherKey[40:60])} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error shows file content: %v", tc.name, err)
			}
		}
	}
	if _, err := ClientTLS(TLSFiles{CertFile: cert, KeyFile: key}); err != nil {
		t.Errorf("a good pair: %v", err)
	}
}
