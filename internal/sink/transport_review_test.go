package sink

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedirectIsNotFollowed: a receiver's 307 to another host is not
// followed, so the Authorization header (from header_files), the
// signature and the payload never reach that host; the row is dead.
func TestRedirectIsNotFollowed(t *testing.T) {
	var other atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.Add(1) }))
	defer elsewhere.Close()
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer recv.Close()
	h, err := New(Config{Name: "s", URL: recv.URL + "/in", Headers: map[string]string{"Authorization": "Bearer hunter2"},
		Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		t.Fatal(err)
	}
	res := h.Deliver(context.Background(), Message{EffectKey: "k", Kind: "payment.posted", Payload: []byte(`{}`)}, time.Now())
	if res.Outcome != Dead || res.Status != http.StatusTemporaryRedirect {
		t.Errorf("%v %d %q", res.Outcome, res.Status, res.Err)
	}
	if n := other.Load(); n != 0 {
		t.Errorf("the redirect was followed: %d requests reached the other host", n)
	}
}

// TestUntrustedCertificateIsRefused: an HTTPS receiver whose certificate
// the system roots do not vouch for gets nothing.
func TestUntrustedCertificateIsRefused(t *testing.T) {
	var got atomic.Int32
	recv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	recv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	recv.StartTLS()
	defer recv.Close()
	h, err := New(Config{Name: "s", URL: recv.URL + "/in"})
	if err != nil {
		t.Fatal(err)
	}
	res := h.Deliver(context.Background(), Message{EffectKey: "k", Kind: "payment.posted", Payload: []byte(`{}`)}, time.Now())
	if res.Outcome != Retry || !strings.Contains(res.Err, "certificate") || got.Load() != 0 {
		t.Errorf("%v %q, %d requests served", res.Outcome, res.Err, got.Load())
	}
}

// TestHugeResponseIsReadBounded: a receiver answering with a 64 MiB body
// is read to about 1 MiB, and only a short excerpt is kept.
func TestHugeResponseIsReadBounded(t *testing.T) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < 1024; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer recv.Close()
	h, err := New(Config{Name: "s", URL: recv.URL + "/in"})
	if err != nil {
		t.Fatal(err)
	}
	res := h.Deliver(context.Background(), Message{EffectKey: "k", Kind: "payment.posted", Payload: []byte(`{}`)}, time.Now())
	if res.Outcome != Retry || len(res.Response) > excerptLen || res.ResponseSize > excerptLen+1<<20 {
		t.Errorf("%v: excerpt %d bytes, size %d", res.Outcome, len(res.Response), res.ResponseSize)
	}
	recv.CloseClientConnections()
}
