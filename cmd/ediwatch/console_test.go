package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
