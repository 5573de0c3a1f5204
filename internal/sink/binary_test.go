package sink

import (
	"strings"
	"testing"
	"time"
)

// TestHeaderValueFollowsTheHTTPBinding: ce-* header values are
// percent-encoded as the CloudEvents HTTP protocol binding 1.0.2 section
// 3.1.3.2 says: its own example, every character it names, and nothing
// else of printable ASCII.
func TestHeaderValueFollowsTheHTTPBinding(t *testing.T) {
	for in, want := range map[string]string{
		"Euro € 😀":                       "Euro%20%E2%82%AC%20%F0%9F%98%80", // the specification's example
		` "%`:                            "%20%22%25",
		"tab\there\nnul\x00del\x7f":      "tab%09here%0Anul%00del%7F",
		"ack999:00:ZZ:SENDER:GS*1+2/3=?": "ack999:00:ZZ:SENDER:GS*1+2/3=?",
		"bad \xff utf-8":                 "bad%20%EF%BF%BD%20utf-8", // as encoding/json: U+FFFD
	} {
		if got := HeaderValue(in); got != want {
			t.Errorf("HeaderValue(%q) = %q, want %q", in, got, want)
		}
	}
	var printable strings.Builder
	for c := byte(0x21); c <= 0x7e; c++ {
		if c != '"' && c != '%' {
			printable.WriteByte(c)
		}
	}
	if got := HeaderValue(printable.String()); got != printable.String() {
		t.Errorf("printable ASCII encoded: %q", got)
	}
}

// TestBinaryModeBody: in binary mode the body is the payload alone
// (application/json) and the attributes are headers, with no
// ce-datacontenttype; a raw acknowledgment stays X12 in both modes, and
// structured mode sends no ce-* header.
func TestBinaryModeBody(t *testing.T) {
	row := Message{EffectKey: "payment:1:EFT 1", Kind: "payment.posted", Payload: []byte(`{"amount":"1.00"}`),
		CreatedAt: time.Date(2026, 11, 30, 12, 0, 0, 5, time.UTC)}
	ack := Message{EffectKey: "ack999:k", Kind: "ack.999", Payload: []byte(`{"x12":"ISA*00~"}`), CreatedAt: row.CreatedAt}
	bin, err := New(Config{Name: "s", URL: "https://x.example.test/", Mode: ModeBinary, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	body, ctype, err := bin.Body(row)
	if err != nil || string(body) != `{"amount":"1.00"}` || ctype != "application/json" {
		t.Errorf("binary body %s, %s, %v", body, ctype, err)
	}
	h := bin.Attributes(row)
	if h.Get("ce-id") != "payment:1:EFT%201" || h.Get("ce-specversion") != "1.0" || h.Get("ce-source") != "ediwatch" ||
		h.Get("ce-type") != "ediwatch.payment.posted" || h.Get("ce-time") != "2026-11-30T12:00:00.000000005Z" ||
		h.Get("ce-datacontenttype") != "" {
		t.Errorf("binary headers %v", h)
	}
	if body, ctype, _ := bin.Body(ack); string(body) != "ISA*00~" || ctype != "application/edi-x12" {
		t.Errorf("binary raw ack %q, %s", body, ctype)
	}
	st, _ := New(Config{Name: "s", URL: "https://x.example.test/", Raw: true})
	if body, ctype, _ := st.Body(ack); string(body) != "ISA*00~" || ctype != "application/edi-x12" || st.Attributes(ack) != nil {
		t.Errorf("structured raw ack %q, %s", body, ctype)
	}
	if _, err := New(Config{Name: "s", URL: "https://x.example.test/", Mode: "binery"}); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

// TestRawSinkSendsOnlyItsOwnAcknowledgmentsAsX12: on a raw sink a 999 or
// TA1 ediwatch generated goes as its X12 text; a partner's acknowledgment
// (ack.received, whose payload has no x12 field) stays a CloudEvent with
// its data, never an empty X12 body.
func TestRawSinkSendsOnlyItsOwnAcknowledgmentsAsX12(t *testing.T) {
	raw, err := New(Config{Name: "acks", URL: "https://x.example.test/", Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, kind := range []string{"ack.999", "ack.ta1"} {
		body, ctype, err := raw.Body(Message{EffectKey: "k", Kind: kind, Payload: []byte(`{"x12":"ISA*00~"}`), CreatedAt: at})
		if err != nil || string(body) != "ISA*00~" || ctype != "application/edi-x12" {
			t.Errorf("%s: %q, %s, %v", kind, body, ctype, err)
		}
	}
	data := `{"verdict":"accepted","ak202":"0001"}`
	body, ctype, err := raw.Body(Message{EffectKey: "ackrcv:k", Kind: "ack.received", Payload: []byte(data), CreatedAt: at})
	if err != nil || ctype != "application/cloudevents+json" || !strings.Contains(string(body), `"data":`+data) ||
		!strings.Contains(string(body), `"type":"ediwatch.ack.received"`) {
		t.Errorf("ack.received on a raw sink: %s, %s, %v", body, ctype, err)
	}
}
