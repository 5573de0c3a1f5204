package sink

import (
	"context"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://erp.example.test/in":                          "https://erp.example.test/in",
		"https://erp.example.test:8443/":                       "https://erp.example.test:8443/",
		"https://bob:pw@erp.example.test/in":                   "https://[redacted]@erp.example.test/in",
		"https://erp.example.test/in?token=abc&page=2":         "https://erp.example.test/in?[redacted]",
		"https://h/in?api_key=a&X-Signature=b&client_secret=c": "https://h/in?[redacted]",
		// Credentials under names that do not say so, and in the path.
		"https://h/in?hmac=s3cr3t":                         "https://h/in?[redacted]",
		"https://h/in?s3cr3t":                              "https://h/in?[redacted]",
		"https://hooks.example.test/services/T0/B0/s3cr3t": "https://hooks.example.test/services/[redacted]",
		"https://h/in/":                                    "https://h/in/",
		"::not a url":                                      "[redacted url]",
		"erp.example.test/in?token=s3cr3t":                 "[redacted url]",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNetworkErrorRedactsURL: a failed connection's error names the sink
// URL without its userinfo or credential parameters.
func TestNetworkErrorRedactsURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the connection is refused
	h, err := New(Config{Name: "s", URL: "http://bob:hunter2@" + addr + "/in?token=hunter3", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res := h.Deliver(context.Background(), Message{EffectKey: "k", Kind: "payment.posted", Payload: []byte(`{}`)}, time.Now())
	if res.Outcome != Retry || strings.Contains(res.Err, "hunter") || strings.Contains(res.Err, "bob") || !strings.Contains(res.Err, addr) {
		t.Errorf("%v: %q", res.Outcome, res.Err)
	}
}

func TestLogKeyHidesClaimKeys(t *testing.T) {
	if got := LogKey("claim.received", "claim:x12:P:ZZ:S:ZZ:R:1:S:R:1:837:0001:PCN123"); strings.Contains(got, "PCN123") ||
		!strings.HasPrefix(got, "claim.received:sha256:") {
		t.Errorf("claim key %q", got)
	}
	if got := LogKey("payment.posted", "payment:1512345678:EFT0001"); got != "payment:1512345678:EFT0001" {
		t.Errorf("payment key %q", got)
	}
}

// TestVerifyAcceptsTheSpecificationVector: Verify accepts the Standard
// Webhooks specification's test vector and refuses it altered.
func TestVerifyAcceptsTheSpecificationVector(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"test": 2432232314}`)
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	if !Verify(secret, h, body) {
		t.Fatal("the specification's vector does not verify")
	}
	if Verify(secret, h, []byte(`{"test": 2432232315}`)) {
		t.Error("an altered body verifies")
	}
	h.Set("webhook-timestamp", "1614265331")
	if Verify(secret, h, body) {
		t.Error("an altered timestamp verifies")
	}
}

// TestVerifyAcceptsWhatSignSigns: every secret of a sink signs, and a
// receiver holding any one of them verifies.
func TestVerifyAcceptsWhatSignSigns(t *testing.T) {
	secrets := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kIHNlY3JldCBrZXk="}
	h, err := New(Config{Name: "t", URL: "https://h/in", Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"k"}`)
	hdr := http.Header{}
	hdr.Set("webhook-id", "k")
	hdr.Set("webhook-timestamp", "1700000000")
	hdr.Set("webhook-signature", h.Sign("k", 1700000000, body))
	for _, s := range secrets {
		if !Verify(s, hdr, body) {
			t.Errorf("a signature under %s... does not verify", s[:10])
		}
	}
	if Verify("whsec_b3RoZXI=", hdr, body) {
		t.Error("another secret verifies")
	}
}

// TestRetryAfterBeyondDurationRangeIsTheLongestWait: a Retry-After in
// seconds too large for a time.Duration (a garbage or "never" value) is
// the longest wait there is, never a wrapped-around one (18446744074 s
// wrapped to 290 ms, 9223372037 s to a negative wait, i.e. none) nor
// ignored (more digits than an int64 holds).
func TestRetryAfterBeyondDurationRangeIsTheLongestWait(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"9223372037", "18446744074", "99999999999", "99999999999999999999999"} {
		if got := Classify(503, v, nil, now).RetryAfter; got != time.Duration(math.MaxInt64) {
			t.Errorf("Retry-After: %s waits %s, want the longest wait", v, got)
		}
	}
	if got := Classify(429, "9223372036", nil, now).RetryAfter; got != 9223372036*time.Second {
		t.Errorf("the largest Retry-After in range waits %s", got)
	}
}
