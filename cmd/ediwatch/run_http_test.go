package main

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestMetricsServerTimeouts: the metrics server bounds reading a request,
// writing a response and idle keep-alive connections, not only headers.
func TestMetricsServerTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: header %s, read %s, write %s, idle %s", srv.ReadHeaderTimeout, srv.ReadTimeout,
			srv.WriteTimeout, srv.IdleTimeout)
	}
	// /readyz waits up to 2s for the store: the write timeout must allow it.
	if srv.WriteTimeout < 5*time.Second {
		t.Errorf("write timeout %s shorter than /readyz needs", srv.WriteTimeout)
	}
	// A client that sends headers and then never the body it announced is
	// cut off by the read timeout (shortened here), not held forever.
	srv.ReadTimeout = 200 * time.Millisecond
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.ReadAll(r.Body) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
	_, err = io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the server held a stalled request open")
	}
}
