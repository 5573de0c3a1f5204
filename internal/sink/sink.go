// Package sink delivers messages (outbox rows, as the relay gives them) to HTTP endpoints under ediwatch's
// delivery contract: a CloudEvents 1.0 event, structured (the JSON event as
// the body) or binary (the data as the body, the attributes as ce-*
// headers), or the raw X12 of an acknowledgment; an Idempotency-Key that is the effect key on every
// attempt, Standard Webhooks signatures, traceparent and X-Correlation-ID.
// Only 2xx is delivered; 408, 409 (the receiver is still processing that
// Idempotency-Key), 425, 429, 5xx and network errors are retried; 410
// Gone says the sink is gone (the relay disables it and keeps its rows);
// any other status is dead.
package sink

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ediwatch/ediwatch/internal/secretfile"
)

// Message is what one delivery sends: an outbox row as the relay hands it
// over.
type Message struct {
	// EffectKey names the effect on every attempt (the Idempotency-Key).
	EffectKey string
	// Kind is the effect kind (payment.posted, ack.999, ...).
	Kind          string
	CorrelationID string
	Payload       json.RawMessage
	// CreatedAt is when the effect was recorded (the event time).
	CreatedAt time.Time
	// Attempt counts the attempts to deliver the row to this sink, this
	// one included (1 for the first; a replay from the dead-letter queue
	// starts again at 1); 0 when unknown. Two holders of one row at once
	// (a lease that lapsed) never have the same number.
	Attempt int
}

// Outcome is what a delivery attempt decided.
type Outcome int

const (
	Delivered Outcome = iota + 1
	Retry
	Dead
	// Gone: the receiver answered 410 Gone (Standard Webhooks: the
	// endpoint is gone for good). The sink is disabled, not the row.
	Gone
)

func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case Dead:
		return "dead"
	case Gone:
		return "gone"
	}
	return "unknown"
}

// Result is the outcome of one attempt.
type Result struct {
	Outcome Outcome
	Status  int // HTTP status, 0 when none came back
	// RetryAfter is what the receiver asked for (Retry-After), 0 if nothing.
	RetryAfter time.Duration
	// Err describes a failure: the status, or the network error with the
	// sink URL's credentials redacted. Never a request or response body.
	Err string
	// Response is a bounded excerpt of the response body of a failure.
	// Receivers echo payloads, so it may hold patient data: it goes to the
	// store only, never to a log line.
	Response string
	// ResponseSize is the size in bytes of the response body the receiver
	// sent: what was read (up to about 1 MiB), or its Content-Length when
	// larger.
	ResponseSize int64
	// Timeout reports that no response came back because the sink's
	// timeout expired (Status is 0).
	Timeout bool
}

// Config configures an HTTP sink.
type Config struct {
	Name string
	URL  string
	// Secrets are Standard Webhooks secrets ("whsec_<base64>"); every one
	// signs, so a receiver can rotate.
	Secrets []string
	Timeout time.Duration
	// Raw sends acknowledgments as application/edi-x12 instead of JSON.
	Raw bool
	// Mode is the CloudEvents HTTP content mode: ModeStructured (the
	// default when empty) or ModeBinary.
	Mode string
	// Headers are static headers (e.g. authorization), values from files.
	Headers map[string]string
	// TLS, when set, is the TLS configuration of the default client
	// (ClientTLS: a private CA, a client certificate); nil: Go's, the
	// receiver verified against the system roots.
	TLS *tls.Config
	// Client is the HTTP client (default: TLS verified with the system
	// roots or TLS, no redirects followed).
	Client *http.Client
}

// The CloudEvents HTTP content modes (HTTP protocol binding 1.0.2, 3.1
// and 3.2). Structured sends the whole event as the JSON body
// (application/cloudevents+json); binary sends the event's data as the
// body with its own content type and every other attribute as a ce-*
// header.
const (
	ModeStructured = "structured"
	ModeBinary     = "binary"
)

// DefaultTimeout is the Timeout of a Config that sets none.
const DefaultTimeout = 30 * time.Second

// HTTP is a sink. It is safe for concurrent use.
type HTTP struct {
	cfg  Config
	keys [][]byte
}

// New checks the configuration and decodes the secrets.
func New(cfg Config) (*HTTP, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		// Keep enough idle connections for every relay worker: the default
		// of two per host makes most requests open a new connection.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 64
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS.Clone()
		}
		cfg.Client = &http.Client{Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeStructured
	case ModeStructured, ModeBinary:
	default:
		return nil, fmt.Errorf("sink %s: mode %q is not %s or %s", cfg.Name, cfg.Mode, ModeStructured, ModeBinary)
	}
	h := &HTTP{cfg: cfg}
	for i, s := range cfg.Secrets {
		b64, ok := strings.CutPrefix(strings.TrimSpace(s), "whsec_")
		if !ok {
			return nil, fmt.Errorf("sink %s: secret %d is not of the form whsec_<base64>", cfg.Name, i+1)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(key) == 0 {
			return nil, fmt.Errorf("sink %s: secret %d: invalid base64", cfg.Name, i+1)
		}
		h.keys = append(h.keys, key)
	}
	return h, nil
}

// SecretsFromFile reads Standard Webhooks secrets, one per line.
func SecretsFromFile(path string) ([]string, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, nil
}

// event is a CloudEvents 1.0 envelope in JSON.
type event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Subject         string          `json:"subject,omitempty"`
	Data            json.RawMessage `json:"data"`
}

// Body returns the request body and content type for a message: in
// structured mode the CloudEvents JSON event, in binary mode the event's
// data alone (the payload, application/json); on a raw sink, an
// acknowledgment ediwatch sends (ack.999, ack.ta1) is its X12 text
// (application/edi-x12) in either mode, and every other kind (a received
// acknowledgment's ack.received event among them) stays an event.
func (h *HTTP) Body(row Message) ([]byte, string, error) {
	if h.cfg.Raw && (row.Kind == "ack.999" || row.Kind == "ack.ta1") {
		var a struct {
			X12 string `json:"x12"`
		}
		if err := json.Unmarshal(row.Payload, &a); err != nil {
			return nil, "", fmt.Errorf("ack payload: %w", err)
		}
		return []byte(a.X12), "application/edi-x12", nil
	}
	if h.cfg.Mode == ModeBinary {
		return row.Payload, "application/json", nil
	}
	b, err := json.Marshal(event{SpecVersion: "1.0", ID: row.EffectKey, Source: eventSource, Type: eventType(row.Kind),
		Time: eventTime(row.CreatedAt), DataContentType: "application/json", Data: row.Payload})
	return b, "application/cloudevents+json", err
}

// Attributes returns the ce-* headers of a binary-mode request: every
// CloudEvents attribute but data and datacontenttype (the Content-Type
// carries it), values percent-encoded as the HTTP protocol binding 1.0.2
// section 3.1.3.2 asks. In structured mode it returns none: the event in
// the body holds them, and a raw acknowledgment is no event.
func (h *HTTP) Attributes(row Message) http.Header {
	if h.cfg.Mode != ModeBinary {
		return nil
	}
	return http.Header{
		"Ce-Specversion": {"1.0"},
		"Ce-Id":          {HeaderValue(row.EffectKey)},
		"Ce-Source":      {HeaderValue(eventSource)},
		"Ce-Type":        {HeaderValue(eventType(row.Kind))},
		"Ce-Time":        {HeaderValue(eventTime(row.CreatedAt))},
	}
}

// HeaderValue percent-encodes s for a ce-* header (CloudEvents HTTP
// protocol binding 1.0.2, 3.1.3.2): space, double quote, percent and every
// character outside printable ASCII (U+0021..U+007E) become %XX of their
// UTF-8 bytes, upper-case hex. Invalid UTF-8 is first replaced by U+FFFD,
// as encoding/json does in the structured body, so both modes carry the
// same value.
func HeaderValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hexdigits[c>>4])
			b.WriteByte(hexdigits[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

const eventSource = "ediwatch"

func eventType(kind string) string { return "ediwatch." + kind }

func eventTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Sign returns the webhook-signature header value for id, timestamp and
// body: "v1,<base64 HMAC-SHA256>" per secret, space-separated.
func (h *HTTP) Sign(id string, ts int64, body []byte) string {
	var sigs []string
	for _, k := range h.keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

// Verify reports whether a request with header h and body holds a valid
// Standard Webhooks signature under secret ("whsec_<base64>"): one of the
// webhook-signature values is v1 and the HMAC-SHA256 of webhook-id,
// webhook-timestamp and body. It is what a receiver checks (the demo's
// receiver, the tests'); it does not check the timestamp's age.
func Verify(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(secret), "whsec_"))
	if err != nil || len(key) == 0 {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	m.Write(body)
	want := []byte("v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), want) {
			return true
		}
	}
	return false
}

// traceparent carries the file's trace: the trace id derives from the
// correlation id, so every effect of one file shares it; the span is per
// attempt.
func traceparent(correlation string) string {
	sum := sha256.Sum256([]byte(correlation))
	var span [8]byte
	rand.Read(span[:])
	return "00-" + hex.EncodeToString(sum[:16]) + "-" + hex.EncodeToString(span[:]) + "-01"
}

const excerptLen = 256

// Deliver makes one attempt at row. It never returns the request body or
// the row's payload in Result.
func (h *HTTP) Deliver(ctx context.Context, row Message, now time.Time) Result {
	body, ctype, err := h.Body(row)
	if err != nil {
		return Result{Outcome: Dead, Err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Outcome: Dead, Err: err.Error()}
	}
	req.Header.Set("Content-Type", ctype)
	for k, v := range h.Attributes(row) {
		req.Header[k] = v
	}
	req.Header.Set("Idempotency-Key", row.EffectKey)
	req.Header.Set("X-Correlation-ID", row.CorrelationID)
	req.Header.Set("traceparent", traceparent(row.CorrelationID))
	req.Header.Set("User-Agent", "ediwatch")
	if len(h.keys) > 0 {
		ts := now.Unix()
		req.Header.Set("webhook-id", row.EffectKey)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("webhook-signature", h.Sign(row.EffectKey, ts, body))
	}
	for k, v := range h.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		var ne net.Error
		return Result{Outcome: Retry, Err: h.redactError(err),
			Timeout: errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()}
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, excerptLen))
	rest, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	res := Classify(resp.StatusCode, resp.Header.Get("Retry-After"), excerpt, now)
	res.ResponseSize = max(int64(len(excerpt))+rest, resp.ContentLength)
	return res
}

// Classify maps a response to an outcome under the delivery contract.
func Classify(status int, retryAfter string, excerpt []byte, now time.Time) Result {
	r := Result{Status: status}
	switch {
	case status >= 200 && status < 300:
		r.Outcome = Delivered
		return r
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status == http.StatusTooEarly ||
		status == http.StatusTooManyRequests || status >= 500:
		// 409: under the Idempotency-Key draft the receiver is still
		// processing a request with this key; the outcome is unknown yet.
		r.Outcome = Retry
		r.RetryAfter = parseRetryAfter(retryAfter, now)
	case status == http.StatusGone:
		r.Outcome = Gone
	default:
		r.Outcome = Dead
	}
	r.Err = fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	r.Response = printable(excerpt)
	return r
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		// More seconds than a Duration holds is the longest wait, not a
		// wrapped-around one.
		if err != nil || secs > uint64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func printable(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, string(b))
	return strings.TrimSpace(s)
}

// redactError keeps the sink URL's credentials out of a network error.
func (h *HTTP) redactError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	msg := err.Error()
	if red := RedactURL(h.cfg.URL); red != h.cfg.URL {
		msg = strings.ReplaceAll(msg, h.cfg.URL, red)
	}
	return msg
}

// RedactURL returns u fit to show in a message or log line: scheme, host
// and port, and the first segment of the path. Userinfo, the query string
// and any deeper path (webhook URLs carry tokens there, as in
// /services/T0/B0/<token>) are replaced by "[redacted]", whatever their
// names: a credential need not be called one. A string that does not parse
// as a URL is returned as "[redacted url]".
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" || p.Host == "" {
		return "[redacted url]"
	}
	var b strings.Builder
	b.WriteString(p.Scheme + "://")
	if p.User != nil {
		b.WriteString("[redacted]@")
	}
	b.WriteString(p.Host)
	if path := p.EscapedPath(); path != "" {
		first, rest, deeper := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		b.WriteString("/" + first)
		if deeper && rest != "" {
			b.WriteString("/[redacted]")
		} else if deeper {
			b.WriteString("/")
		}
	}
	if p.RawQuery != "" || p.ForceQuery {
		b.WriteString("?[redacted]")
	}
	return b.String()
}

// LogKey returns an effect key fit for a log line or a listing: keys of
// kinds whose keys name only payers, senders and control numbers are
// returned as they are; any other key (a claim's names a patient control
// number) is replaced by a digest, which still tells rows apart.
func LogKey(kind, key string) string {
	switch kind {
	case "payment.posted", "ack.999", "ack.ta1", "ack.received":
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return kind + ":sha256:" + hex.EncodeToString(sum[:8])
}
