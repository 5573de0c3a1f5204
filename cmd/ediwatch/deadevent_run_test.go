package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunSendsDeliveryDeadToChat: `ediwatch run` with routes.delivery.dead
// set: the ledger refuses the payment (400), and the chat receiver gets
// an ediwatch.delivery.dead event naming it, without its payload.
func TestRunSendsDeliveryDeadToChat(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "payment:") {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer refuse.Close()
	var mu sync.Mutex
	var events []map[string]any
	var bodies []string
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev map[string]any
		json.Unmarshal(b, &ev)
		mu.Lock()
		events = append(events, ev)
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	defer chat.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ediwatch.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`store: {driver: sqlite, dsn: %q}
sinks:
  ledger: {url: %q}
  acks: {url: %q}
  chat: {url: %q}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: acks, ack.ta1: acks, delivery.dead: chat}
http: {listen: "127.0.0.1:0"}
`, "file:"+filepath.Join(dir, "e.db"), refuse.URL, refuse.URL, chat.URL)), 0o600)
	if out, err := command(t, "ingest", "--config", cfg, fixture("835_canonical.x12")).CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v: %s", err, out)
	}
	startDaemon(t, cfg)
	waitFor(t, "a delivery.dead event", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if events[0]["type"] != "ediwatch.delivery.dead" {
		t.Fatalf("chat received %v", bodies)
	}
	data, _ := events[0]["data"].(map[string]any)
	if data["kind"] != "payment.posted" || data["sink"] != "ledger" || data["http_status"] != float64(400) ||
		data["error_class"] != "4xx" || data["reason"] != "rejected" || data["effect_key"] != "payment:1512345678:EFT0001" {
		t.Errorf("event data %v", data)
	}
	// Only what names the dead row and its failure: no payload field.
	if len(data) != 10 {
		t.Errorf("event data has %d fields: %v", len(data), data)
	}
}
