package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReceivedAcknowledgmentRoutes: ack.received and claim.status may be
// routed, need not be (a configuration written before them stays valid),
// a misspelt kind is refused; ack_277 is off unless a source sets it.
func TestReceivedAcknowledgmentRoutes(t *testing.T) {
	write := func(routes string) string {
		path := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(path, []byte(`sinks:
  s: {url: "https://x.example.test/"}
routes: {payment.posted: s, claim.received: s, ack.999: s, ack.ta1: s`+routes+`}
sources:
  - {name: a, type: local, directories: [/in], ack_277: true}
  - {name: b, type: local, directories: [/in-b]}
`), 0o600)
		return path
	}
	c, err := Load(write(", ack.received: s, claim.status: s"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.Routes["ack.received"]) != "[s]" || fmt.Sprint(c.Routes["claim.status"]) != "[s]" || !c.Sources[0].Ack277 || c.Sources[1].Ack277 {
		t.Errorf("routes %v, sources %+v", c.Routes, c.Sources)
	}
	if _, err := Load(write("")); err != nil {
		t.Errorf("without the optional kinds: %v", err)
	}
	if _, err := Load(write(", ack.recieved: s")); err == nil || !strings.Contains(err.Error(), "routes.ack.recieved") {
		t.Errorf("a misspelt kind: %v", err)
	}
}

// TestReceivedAcknowledgmentsMayGoToARawSink: a raw sink sends the X12
// of ediwatch's own acknowledgments only; a partner's acknowledgment
// routed to the same sink travels as an event (sink.TestRawSinkSends...),
// so the route is accepted.
func TestReceivedAcknowledgmentsMayGoToARawSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`sinks:
  s: {url: "https://x.example.test/"}
  raw: {url: "https://x.example.test/x12", raw: true}
routes: {payment.posted: s, claim.received: s, ack.999: raw, ack.ta1: raw, ack.received: raw, claim.status: raw}
`), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.Routes["ack.received"]) != "[raw]" {
		t.Errorf("routes %v", c.Routes)
	}
}
