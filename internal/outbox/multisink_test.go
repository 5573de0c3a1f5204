package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestOneEffectHasOneIdempotencyKeyAtEverySink: an effect routed to two
// sinks is two outbox rows under its one effect key, and both receivers
// get that key as Idempotency-Key, webhook-id and CloudEvent id, so a
// receiver that dedupes by key sees one key per effect whatever the route.
func TestOneEffectHasOneIdempotencyKeyAtEverySink(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		type got struct{ idem, webhookID, ceID string }
		var mu sync.Mutex
		seen := map[string][]got{}
		receiver := func(name string) *httptest.Server {
			return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var ev struct {
					ID   string `json:"id"`
					Type string `json:"type"`
				}
				json.Unmarshal(b, &ev)
				if ev.Type == "ediwatch.payment.posted" {
					mu.Lock()
					seen[name] = append(seen[name], got{r.Header.Get("Idempotency-Key"), r.Header.Get("webhook-id"), ev.ID})
					mu.Unlock()
				}
			}))
		}
		ledger, audit := receiver("ledger"), receiver("audit")
		defer ledger.Close()
		defer audit.Close()
		routes := map[string][]string{}
		for k, v := range storetest.Routes {
			routes[k] = v
		}
		routes["payment.posted"] = []string{"ledger", "audit"}
		var b bytes.Buffer
		x12gen.Remit{Control: 41}.Write(&b)
		data := b.Bytes()
		if _, err := inbox.Ingest(context.Background(), inbox.Options{Store: st, Routes: routes},
			inbox.FileInfo{Source: "test", Path: "p.835", Size: int64(len(data)), MTime: time.Now(), SHA256: "sha-p",
				CorrelationID: store.NewCorrelationID(), Now: time.Now().UTC()}, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		rows := rowsOfKind(t, st, "payment.posted")
		if len(rows) != 2 || rows[1].EffectKey != rows[0].EffectKey || rows[0].Sink == rows[1].Sink {
			t.Fatalf("payment rows %+v, want one per sink under one effect key", rows)
		}
		secret := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
		l, _ := sink.New(sink.Config{Name: "ledger", URL: ledger.URL, Secrets: secret})
		a, _ := sink.New(sink.Config{Name: "audit", URL: audit.URL, Secrets: secret})
		other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		defer other.Close()
		acks, _ := sink.New(sink.Config{Name: "acks", URL: other.URL})
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 2, Idle: 20 * time.Millisecond}, st,
			map[string]outbox.Deliverer{"ledger": l, "audit": a, "acks": acks}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		runUntil(t, r, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen["ledger"]) == 1 && len(seen["audit"]) == 1
		})
		mu.Lock()
		defer mu.Unlock()
		want := rows[0].EffectKey
		for _, name := range []string{"ledger", "audit"} {
			if len(seen[name]) != 1 {
				t.Fatalf("%s got %d payments, want 1", name, len(seen[name]))
			}
			g := seen[name][0]
			if g.idem != want || g.webhookID != want || g.ceID != want || strings.HasPrefix(g.idem, "@") {
				t.Errorf("%s got %+v, want the effect key %q in each", name, g, want)
			}
		}
	})
}
