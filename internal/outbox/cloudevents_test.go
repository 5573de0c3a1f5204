package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// oddKey is an effect key a payer's trace number can produce: space,
// double quote, percent and non-ASCII all need percent-encoding in ce-id.
const oddKey = `payment:1512345678:EFT 44 "Q4" 100% é€`

// oddKeyHeader is oddKey as the CloudEvents HTTP binding 1.0.2, 3.1.3.2
// encodes it.
const oddKeyHeader = `payment:1512345678:EFT%2044%20%22Q4%22%20100%25%20%C3%A9%E2%82%AC`

// received is what the official receiver made of one request.
type received struct {
	header http.Header
	body   []byte
	// id, typ, source, subject are the event's attributes after the
	// binding's percent-decoding; empty for a raw acknowledgment.
	id, typ, source, ctype string
	time                   time.Time
	data                   []byte
	binary, raw            bool
}

// officialReceiver is a real HTTP receiver built on the official libraries:
// it verifies every request with the Standard Webhooks Go library and
// parses it with the CloudEvents Go SDK (structured or binary, as the
// Content-Type says). A request that fails either is answered 400 and
// recorded as a failure. A raw acknowledgment in structured mode is no
// CloudEvent: its body is kept as sent.
type officialReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	byID     map[string]received
	failures []string
}

func newOfficialReceiver(t *testing.T) *officialReceiver {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &officialReceiver{byID: map[string]received{}}
	fail := func(w http.ResponseWriter, format string, a ...any) {
		rc.mu.Lock()
		rc.failures = append(rc.failures, fmt.Sprintf(format, a...))
		rc.mu.Unlock()
		http.Error(w, "refused", http.StatusBadRequest)
	}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			fail(w, "standard webhooks: %v", err)
			return
		}
		got := received{header: r.Header.Clone(), body: body}
		r.Body = io.NopCloser(bytes.NewReader(body))
		msg := cehttp.NewMessageFromHttpRequest(r)
		switch msg.ReadEncoding() {
		case binding.EncodingUnknown:
			got.raw = true
			got.id = r.Header.Get("Idempotency-Key")
		case binding.EncodingBinary, binding.EncodingStructured:
			got.binary = msg.ReadEncoding() == binding.EncodingBinary
			ev, err := binding.ToEvent(r.Context(), msg)
			if err != nil {
				fail(w, "cloudevents: %v", err)
				return
			}
			if err := ev.Validate(); err != nil {
				fail(w, "cloudevents: %v", err)
				return
			}
			got.id, got.typ, got.source = ev.ID(), ev.Type(), ev.Source()
			if got.binary {
				// The SDK (v2.16.2) leaves the binding's percent-encoding
				// in place (cloudevents/sdk-go#1331); a receiver decodes
				// one round itself, as 3.1.3.2 says.
				for _, v := range []*string{&got.id, &got.typ, &got.source} {
					if *v, err = percentDecode(*v); err != nil {
						fail(w, "ce header: %v", err)
						return
					}
				}
			}
			got.ctype, got.time, got.data = ev.DataContentType(), ev.Time(), ev.Data()
		default:
			fail(w, "unexpected encoding %v", msg.ReadEncoding())
			return
		}
		rc.mu.Lock()
		rc.byID[got.id] = got
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// percentDecode is one round of the HTTP binding's percent-decoding; the
// bytes decoded must be UTF-8.
func percentDecode(s string) (string, error) {
	out, err := url.PathUnescape(s)
	if err != nil {
		return "", err
	}
	if !utf8.ValidString(out) {
		return "", fmt.Errorf("%q decodes to invalid UTF-8", s)
	}
	return out, nil
}

// TestOfficialReceiverAcceptsBothModes: the rows of a real 835 (a payment
// and its 999) and a payment whose effect key needs percent-encoding are
// delivered, in structured and in binary mode, to a receiver built on the
// official Standard Webhooks and CloudEvents libraries. Every request
// verifies; the parsed event's id, type, source, time, datacontenttype and
// data are the outbox row's; the raw acknowledgment is the X12 text
// (application/edi-x12) in both modes, in binary mode as the data of an
// event.
func TestOfficialReceiverAcceptsBothModes(t *testing.T) {
	for _, mode := range []string{sink.ModeStructured, sink.ModeBinary} {
		t.Run(mode, func(t *testing.T) {
			drivers(t, func(t *testing.T, st store.Store) {
				ctx := context.Background()
				if _, err := storetest.IngestNow(t, st, "a.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
					t.Fatal(err)
				}
				ing, err := st.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "odd", MTime: time.Now(),
					CorrelationID: "c-odd", Now: time.Now().UTC()})
				if err != nil {
					t.Fatal(err)
				}
				if err := ing.AddAck(ctx, outbox.Effect{Kind: "payment.posted", Key: oddKey, OrderingKey: oddKey,
					Sink: "ledger", Payload: json.RawMessage(`{"amount":"125.50","trace":"EFT 44 \"Q4\" 100% é€"}`)}); err != nil {
					t.Fatal(err)
				}
				if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
					t.Fatal(err)
				}
				rc := newOfficialReceiver(t)
				ledger, err := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Secrets: []string{secret}, Mode: mode})
				if err != nil {
					t.Fatal(err)
				}
				acks, _ := sink.New(sink.Config{Name: "acks", URL: rc.URL, Secrets: []string{secret}, Mode: mode, Raw: true})
				r := outbox.NewRelay(outbox.RelayConfig{}, st, map[string]outbox.Deliverer{"ledger": ledger, "acks": acks},
					zap.NewNop(), metrics.New(prometheus.NewRegistry()))
				for range 3 {
					if _, err := r.RunOnce(ctx); err != nil {
						t.Fatal(err)
					}
				}
				rc.mu.Lock()
				defer rc.mu.Unlock()
				for _, f := range rc.failures {
					t.Errorf("receiver refused a request: %s", f)
				}
				var rows int
				for id := int64(1); id < 20; id++ {
					row, err := st.GetOutbox(ctx, id)
					if err != nil {
						continue
					}
					rows++
					checkReceived(t, mode, row, rc.byID[row.EffectKey])
				}
				if rows != 3 || len(rc.byID) != 3 {
					t.Errorf("%d rows, %d received", rows, len(rc.byID))
				}
				if mode == sink.ModeBinary {
					if got := rc.byID[oddKey].header.Get("ce-id"); got != oddKeyHeader {
						t.Errorf("ce-id %q, want %q", got, oddKeyHeader)
					}
				}
			})
		})
	}
}

// checkReceived compares what the receiver parsed with the outbox row.
func checkReceived(t *testing.T, mode string, row outbox.Row, got received) {
	t.Helper()
	if row.Status != outbox.StatusDelivered {
		t.Errorf("row %d (%s) is %s: %s", row.ID, row.Kind, row.Status, row.LastError)
		return
	}
	var ack struct {
		X12 string `json:"x12"`
	}
	if row.Kind == "ack.999" {
		if err := json.Unmarshal(row.Payload, &ack); err != nil || ack.X12 == "" {
			t.Fatalf("ack payload: %v", err)
		}
		if ct := got.header.Get("Content-Type"); ct != "application/edi-x12" {
			t.Errorf("raw ack sent as %q", ct)
		}
		if mode == sink.ModeStructured {
			if !got.raw || string(got.body) != ack.X12 || got.header.Get("ce-id") != "" {
				t.Errorf("structured raw ack: raw %v, ce-id %q, body %q", got.raw, got.header.Get("ce-id"), got.body)
			}
			return
		}
	}
	if got.raw {
		t.Errorf("row %s: not a CloudEvent", row.Kind)
		return
	}
	if got.binary != (mode == sink.ModeBinary) {
		t.Errorf("row %s: binary %v in mode %s", row.Kind, got.binary, mode)
	}
	if got.id != row.EffectKey || got.typ != "ediwatch."+row.Kind || got.source != "ediwatch" || !got.time.Equal(row.CreatedAt) {
		t.Errorf("event id %q type %q source %q time %s; row key %q kind %s created %s",
			got.id, got.typ, got.source, got.time, row.EffectKey, row.Kind, row.CreatedAt)
	}
	if row.Kind == "ack.999" {
		if got.ctype != "application/edi-x12" || string(got.data) != ack.X12 {
			t.Errorf("binary raw ack: datacontenttype %q, data %q", got.ctype, got.data)
		}
		return
	}
	if got.ctype != "application/json" || !jsonEqual(got.data, row.Payload) {
		t.Errorf("row %s: datacontenttype %q, data %s, want %s", row.Kind, got.ctype, got.data, row.Payload)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
