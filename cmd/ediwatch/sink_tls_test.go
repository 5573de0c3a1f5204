package main

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/sink"
)

// TestSinkTLSFromConfiguration: an https sink's tls.ca_file reaches its
// client (a receiver whose certificate only that file vouches for gets
// the row; without it, the system roots refuse it), and a ca_file that
// cannot be read stops the sink's build, named by its setting.
func TestSinkTLSFromConfiguration(t *testing.T) {
	var got atomic.Int32
	recv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	recv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	recv.StartTLS()
	defer recv.Close()
	ca := filepath.Join(t.TempDir(), "erp-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: recv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	deliver := func(sc config.Sink) sink.Result {
		t.Helper()
		sc.URL, sc.Timeout = recv.URL+"/in", config.Duration(5*time.Second)
		h, err := buildSink("erp", sc)
		if err != nil {
			t.Fatal(err)
		}
		return h.Deliver(context.Background(), sink.Message{EffectKey: "payment:1:T", Kind: "payment.posted",
			Payload: []byte(`{}`)}, time.Now())
	}
	if res := deliver(config.Sink{TLS: config.SinkTLS{CAFile: ca}}); res.Outcome != sink.Delivered || got.Load() != 1 {
		t.Errorf("with tls.ca_file: %v %q, %d served", res.Outcome, res.Err, got.Load())
	}
	if res := deliver(config.Sink{}); res.Outcome != sink.Retry || got.Load() != 1 {
		t.Errorf("without it: %v %q, %d served", res.Outcome, res.Err, got.Load())
	}
	_, err := buildSink("erp", config.Sink{URL: recv.URL, TLS: config.SinkTLS{CAFile: ca + ".gone"}})
	if err == nil || !strings.HasPrefix(err.Error(), "sinks.erp.tls: ca_file") {
		t.Errorf("unreadable ca_file: %v", err)
	}
}
