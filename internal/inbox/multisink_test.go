package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestClaimStatusNamesTheEffectKeyWithClaimsOnTwoSinks: with claims routed
// to two sinks (two outbox rows per claim, both under its effect key), a
// 277CA's claim statuses name each claim once, by its effect key, whichever
// sink's row the lookup found.
func TestClaimStatusNamesTheEffectKeyWithClaimsOnTwoSinks(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, s store.Store) {
		routes := map[string][]string{}
		for k, v := range answerRoutes {
			routes[k] = v
		}
		routes[process.KindClaim] = []string{"ledger", "audit"}
		ingest := func(path string, data []byte) *inbox.Report {
			t.Helper()
			r, err := inbox.Ingest(context.Background(), inbox.Options{Store: s, Routes: routes},
				inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: time.Now(), SHA256: "sha-" + path,
					CorrelationID: store.NewCorrelationID(), Now: time.Now().UTC()}, bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		var claims bytes.Buffer
		x12gen.Claims{Sender: "RIVERSIDE", Receiver: "CLEARING", Control: 41, Claims: 2, IDPrefix: "PCN-"}.Write(&claims)
		keys := ingest("out.837", claims.Bytes()).Sets[0].EffectKeys
		if len(keys) != 2 || keys[0] == keys[1] {
			t.Fatalf("claim rows reported by effect key %v, want two claims", keys)
		}
		ingest("a.277", answer277(701))
		var named []string
		for id := int64(1); id < 50; id++ {
			row, err := s.GetOutbox(context.Background(), id)
			if err != nil || row.Kind != process.KindClaimStatus {
				continue
			}
			var ev struct {
				OriginalKey string `json:"original_key"`
			}
			json.Unmarshal(row.Payload, &ev)
			if ev.OriginalKey != "" {
				named = append(named, ev.OriginalKey)
			}
		}
		slices.Sort(named)
		want := slices.Clone(keys)
		slices.Sort(want)
		if !slices.Equal(named, want) {
			t.Errorf("claim statuses name %v, want the effect keys %v", named, want)
		}
	})
}
