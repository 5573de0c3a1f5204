package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// rowsOfKind returns the outbox rows of kind, in id order.
func rowsOfKind(t *testing.T, st store.Store, kind string) []outbox.Row {
	t.Helper()
	var out []outbox.Row
	for id := int64(1); id < 100; id++ {
		if row, err := st.GetOutbox(context.Background(), id); err == nil && row.Kind == kind {
			out = append(out, row)
		}
	}
	return out
}

// leaves returns the string and number values of a JSON document.
func leaves(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			leaves(x, out)
		}
	case []any:
		for _, x := range v {
			leaves(x, out)
		}
	case string:
		*out = append(*out, v)
	case json.Number:
		*out = append(*out, v.String())
	}
}

// TestDeadLetterSendsDeliveryDeadEvent: a claim its receiver refuses (400)
// dead-letters, and the chat receiver that delivery.dead is routed to gets
// one ediwatch.delivery.dead event naming the dead row (its effect key
// digested: it names a patient), the status, class and attempts, and no
// part of the claim's payload. Replayed and dead again, the row sends a
// second event under a second Idempotency-Key; a delivery.dead row that
// dies itself sends nothing; a discard sends nothing.
func TestDeadLetterSendsDeliveryDeadEvent(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "no such patient")
		}))
		defer refuse.Close()
		var mu sync.Mutex
		var events [][]byte
		var chatRefuses atomic.Bool
		chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			events = append(events, b)
			mu.Unlock()
			if chatRefuses.Load() {
				w.WriteHeader(http.StatusBadRequest)
			}
		}))
		defer chat.Close()
		var b bytes.Buffer
		x12gen.Claims{Control: 31, Claims: 1, IDPrefix: "PCN5150-"}.Write(&b)
		ingestNow(t, st, "c.837", b.Bytes())
		claims := rowsOfKind(t, st, "claim.received")
		if len(claims) != 1 {
			t.Fatalf("%d claim rows", len(claims))
		}
		claim := claims[0]
		ledger, _ := sink.New(sink.Config{Name: "ledger", URL: refuse.URL})
		chatSink, _ := sink.New(sink.Config{Name: "chat", URL: chat.URL})
		newRelay := func() *outbox.Relay {
			return outbox.NewRelay(outbox.RelayConfig{Workers: 1, Idle: 20 * time.Millisecond, DeadEvents: "chat"}, st,
				map[string]outbox.Deliverer{"ledger": ledger, "acks": chatSink, "chat": chatSink}, zap.NewNop(),
				metrics.New(prometheus.NewRegistry()))
		}
		deadEvents := func() []outbox.Row { return rowsOfKind(t, st, outbox.KindDeliveryDead) }
		// The ack goes to the chat receiver too (as "acks"): count events by kind.
		eventsOfType := func(typ string) []map[string]any {
			mu.Lock()
			defer mu.Unlock()
			var out []map[string]any
			for _, e := range events {
				var ev map[string]any
				d := json.NewDecoder(bytes.NewReader(e))
				d.UseNumber()
				if err := d.Decode(&ev); err != nil {
					t.Fatalf("event %s: %v", e, err)
				}
				if ev["type"] == typ {
					out = append(out, ev)
				}
			}
			return out
		}

		runUntil(t, newRelay(), func() bool { return len(eventsOfType("ediwatch.delivery.dead")) == 1 })
		got := eventsOfType("ediwatch.delivery.dead")[0]
		data, _ := got["data"].(map[string]any)
		want := map[string]any{"outbox_id": json.Number(fmt.Sprint(claim.ID)), "sink": "ledger", "kind": "claim.received",
			"effect_key": sink.LogKey(claim.Kind, claim.EffectKey), "reason": "rejected", "http_status": json.Number("400"),
			"error_class": "4xx", "error": "HTTP 400 Bad Request", "attempts": json.Number("1")}
		for k, v := range want {
			if data[k] != v {
				t.Errorf("data.%s = %v, want %v", k, data[k], v)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(data["dead_at"])); err != nil || len(data) != len(want)+1 {
			t.Errorf("data: %v", data)
		}
		if got["id"] != "delivery.dead:"+fmt.Sprint(claim.ID)+":1" {
			t.Errorf("event id %v", got["id"])
		}
		// No part of the claim's payload, nor of the refusal, is in the event.
		var payload any
		d := json.NewDecoder(bytes.NewReader(claim.Payload))
		d.UseNumber()
		if err := d.Decode(&payload); err != nil {
			t.Fatal(err)
		}
		var vals []string
		leaves(payload, &vals)
		raw, _ := json.Marshal(got)
		for _, v := range append(vals, "PCN5150", "no such patient") {
			if len(v) >= 4 && strings.Contains(string(raw), v) {
				t.Errorf("the event holds %q of the claim's payload or response: %s", v, raw)
			}
		}

		// Replayed and refused again: a second event. The chat receiver now
		// refuses too: that event dies and sends no third.
		chatRefuses.Store(true)
		if n, err := st.Replay(ctx, outbox.DeadFilter{IDs: []int64{claim.ID}}, time.Now().UTC()); err != nil || n != 1 {
			t.Fatalf("replay: %d %v", n, err)
		}
		runUntil(t, newRelay(), func() bool {
			ev := deadEvents()
			return len(ev) == 2 && ev[1].Status == outbox.StatusDead
		})
		ev := deadEvents()
		if len(ev) != 2 || ev[0].EffectKey != fmt.Sprintf("delivery.dead:%d:1", claim.ID) ||
			ev[1].EffectKey != fmt.Sprintf("delivery.dead:%d:2", claim.ID) || ev[1].Sink != "chat" ||
			ev[1].CorrelationID != claim.CorrelationID {
			t.Fatalf("delivery.dead rows: %+v", ev)
		}
		if n := len(eventsOfType("ediwatch.delivery.dead")); n != 2 {
			t.Errorf("%d events received, want 2", n)
		}
		// Discarding the dead rows sends nothing either.
		if n, err := st.Discard(ctx, outbox.DeadFilter{}, time.Now().UTC()); err != nil || n != 2 {
			t.Fatalf("discard: %d %v", n, err)
		}
		if ev := deadEvents(); len(ev) != 2 {
			t.Errorf("delivery.dead rows after a discard: %d", len(ev))
		}
	})
}

// TestNoDeadEventsUnlessRouted: without a delivery.dead route, a dead row
// inserts nothing.
func TestNoDeadEventsUnlessRouted(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnprocessableEntity)
		}))
		defer refuse.Close()
		var b bytes.Buffer
		x12gen.Remit{Control: 702, Trace: "NOEV-"}.Write(&b)
		ingestNow(t, st, "r.835", b.Bytes())
		s, _ := sink.New(sink.Config{Name: "ledger", URL: refuse.URL})
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Idle: 20 * time.Millisecond}, st,
			map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		runUntil(t, r, func() bool {
			c, _ := st.Counts(context.Background())
			return c.Outbox[outbox.StatusDead] == 2
		})
		if ev := rowsOfKind(t, st, outbox.KindDeliveryDead); len(ev) != 0 {
			t.Errorf("delivery.dead rows without a route: %+v", ev)
		}
	})
}
