package storetest

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
)

// multiRoutes sends payments and 999s to two sinks each.
var multiRoutes = map[string][]string{
	process.KindPayment: {"ledger", "audit"}, process.KindClaim: {"ledger"},
	process.KindAck999: {"acks", "partner"}, process.KindAckTA1: {"acks"},
}

// testMultiSinkRowsPerEffectAndSink: a kind routed to two sinks gives one
// outbox row per effect and sink (the first under the effect key, the
// second under inbox.SinkKey's), and duplicate and conflict detection
// holds sink by sink: the same payment under new control numbers is a
// business duplicate with no new row for either sink, the same payment key
// with other amounts a conflict on both rows' keys, with no new row.
func testMultiSinkRowsPerEffectAndSink(t *testing.T, s store.Store) {
	ingest := func(path string, data []byte) *inbox.Report {
		t.Helper()
		opts := Options(t, s)
		opts.Routes = multiRoutes
		r, err := inbox.Ingest(context.Background(), opts,
			inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: t0, SHA256: "sha-" + path,
				CorrelationID: store.NewCorrelationID(), Now: t0}, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const pay = "payment:1512345678:EFT0001"
	r := ingest("a.835", Fixture(t, "835_canonical.x12"))
	if o := r.Sets[0]; o.Outcome != inbox.Processed || !slices.Equal(o.EffectKeys, []string{pay, "@audit:" + pay}) ||
		len(r.AckKeys) != 2 || r.AckKeys[1] != "@partner:"+r.AckKeys[0] {
		t.Fatalf("first: %+v, acks %v", r.Sets, r.AckKeys)
	}
	sinks := map[string]string{}
	for id := int64(1); id <= 4; id++ {
		row, err := s.GetOutbox(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		sinks[row.EffectKey] = row.Sink
	}
	if sinks[pay] != "ledger" || sinks["@audit:"+pay] != "audit" || sinks[r.AckKeys[0]] != "acks" ||
		sinks[r.AckKeys[1]] != "partner" {
		t.Errorf("rows by key and sink %v", sinks)
	}
	r = ingest("b.835", Fixture(t, "835_regenerated.x12"))
	if o := r.Sets[0]; o.Outcome != inbox.BusinessDuplicate || len(o.EffectKeys) != 0 || len(r.AckKeys) != 2 {
		t.Errorf("regenerated: %+v, acks %v", r.Sets, r.AckKeys)
	}
	other := Fixture(t, "835_changed_content.x12")
	for _, rp := range [][2]string{{"000000101", "000000303"}, {"*101*X", "*303*X"}, {"GE*1*101", "GE*1*303"}} {
		other = bytes.ReplaceAll(other, []byte(rp[0]), []byte(rp[1]))
	}
	r = ingest("c.835", other)
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 ||
		!slices.Equal(o.ConflictKeys, []string{pay, "@audit:" + pay}) {
		t.Errorf("other amounts under the same payment key: %+v", r.Sets)
	}
	c := counts(t, s)
	// Two payment rows and three 999s for two sinks each.
	if c.Outbox[outbox.StatusPending] != 8 || c.Sightings["business_duplicate"] != 1 || c.Sightings["effect_conflict"] != 2 {
		t.Errorf("counts %+v", c)
	}
}
