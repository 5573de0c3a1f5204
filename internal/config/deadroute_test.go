package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeliveryDeadRoute: delivery.dead may be routed to a configured sink
// (and need not be); routed to a sink that does not exist it is refused.
func TestDeliveryDeadRoute(t *testing.T) {
	load := func(extra string) (Config, error) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(path, []byte(`sinks:
  s: {url: "https://x.example.test/"}
  chat: {url: "https://chat.example.test/hooks"}
routes: {payment.posted: s, claim.received: s, ack.999: s, ack.ta1: s`+extra+`}
sources:
  - {name: a, type: local, directories: [/in]}
`), 0o600)
		return Load(path)
	}
	if _, err := load(""); err != nil {
		t.Fatalf("without a delivery.dead route: %v", err)
	}
	c, err := load(", delivery.dead: chat")
	if err != nil || fmt.Sprint(c.Routes["delivery.dead"]) != "[chat]" {
		t.Fatalf("routes %v: %v", c.Routes, err)
	}
	if _, err := load(", delivery.dead: nowhere"); err == nil ||
		!strings.Contains(err.Error(), `routes.delivery.dead: must name a configured sink (got "nowhere")`) {
		t.Errorf("a route to no sink: %v", err)
	}
}

// TestDeliveryDeadRouteTakesOneSink: the relay records each dead row's
// event for one sink, so a delivery.dead route naming two is refused
// rather than loaded with its second sink silently never getting an event.
func TestDeliveryDeadRouteTakesOneSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  s: {url: "https://x.example.test/"}
  chat: {url: "https://chat.example.test/hooks"}
routes: {payment.posted: s, claim.received: s, ack.999: s, ack.ta1: s, delivery.dead: [chat, s]}
sources:
  - {name: a, type: local, directories: [/in]}
`), 0o600)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "routes.delivery.dead: takes one sink") {
		t.Errorf("delivery.dead routed to two sinks: %v", err)
	}
}
