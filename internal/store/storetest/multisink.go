package storetest

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

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
// outbox row per effect and sink, each under the effect key, and duplicate
// and conflict detection holds sink by sink: the same payment under new control numbers is a
// business duplicate with no new row for either sink, the same payment key
// with other amounts a conflict at both sinks, sighted once, with no new row.
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
	if o := r.Sets[0]; o.Outcome != inbox.Processed || !slices.Equal(o.EffectKeys, []string{pay}) ||
		len(r.AckKeys) != 1 {
		t.Fatalf("first: %+v, acks %v", r.Sets, r.AckKeys)
	}
	if got, want := rowsByKey(t, s), map[string][]string{pay: {"audit", "ledger"}, r.AckKeys[0]: {"acks", "partner"}}; !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("rows' sinks by key %v, want %v", got, want)
	}
	r = ingest("b.835", Fixture(t, "835_regenerated.x12"))
	if o := r.Sets[0]; o.Outcome != inbox.BusinessDuplicate || len(o.EffectKeys) != 0 || len(r.AckKeys) != 1 {
		t.Errorf("regenerated: %+v, acks %v", r.Sets, r.AckKeys)
	}
	other := renumbered(Fixture(t, "835_changed_content.x12"), "101", "303")
	r = ingest("c.835", other)
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 ||
		!slices.Equal(o.ConflictKeys, []string{pay}) {
		t.Errorf("other amounts under the same payment key: %+v", r.Sets)
	}
	c := counts(t, s)
	// Two payment rows and three 999s for two sinks each; the effect
	// conflict, at both sinks, sighted once.
	if c.Outbox[outbox.StatusPending] != 8 || c.Sightings["business_duplicate"] != 1 || c.Sightings["effect_conflict"] != 1 {
		t.Errorf("counts %+v", c)
	}
}

// rowsByKey returns the sinks of s's outbox rows by effect key, in name
// order: the rows of ids up to 64 (ids may have gaps: a PostgreSQL insert
// that finds its row takes an id all the same).
func rowsByKey(t *testing.T, s store.Store) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for id := int64(1); id <= 64; id++ {
		row, err := s.GetOutbox(context.Background(), id)
		if errors.Is(err, outbox.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[row.EffectKey] = append(out[row.EffectKey], row.Sink)
	}
	for _, sinks := range out {
		slices.Sort(sinks)
	}
	return out
}

// ingestPaying ingests data as the file path of source "test" with
// payments routed to the sinks named (acknowledgments to "acks", claims
// to "ledger").
func ingestPaying(t *testing.T, s store.Store, path string, data []byte, sinks ...string) *inbox.Report {
	t.Helper()
	opts := Options(t, s)
	opts.Routes = map[string][]string{process.KindPayment: sinks, process.KindAck999: {"acks"},
		process.KindAckTA1: {"acks"}, process.KindClaim: {"ledger"}}
	r, err := inbox.Ingest(context.Background(), opts,
		inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: t0, SHA256: "sha-" + path,
			CorrelationID: store.NewCorrelationID(), Now: t0}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// renumbered returns one of the 835 fixtures, whose interchange and group
// control numbers are from, under to instead (three digits each): the
// same document sent again under new control numbers.
func renumbered(data []byte, from, to string) []byte {
	for _, rp := range [][2]string{{"000000" + from, "000000" + to}, {"*" + from + "*X", "*" + to + "*X"},
		{"GE*1*" + from, "GE*1*" + to}} {
		data = bytes.ReplaceAll(data, []byte(rp[0]), []byte(rp[1]))
	}
	return data
}

// testRouteOrderDoesNotMatter: the outbox is keyed by effect key and sink,
// so a payment sent again under new control numbers after its route's
// sinks were reordered is a business duplicate at both (before, the
// first sink's row held the bare key, and the reordered route gave the
// old first sink a second row: a second delivery of the payment); and a
// sink put first in the route later gets a row of its own, the others
// none. Every row carries the effect key as its Idempotency-Key.
func testRouteOrderDoesNotMatter(t *testing.T, s store.Store) {
	const pay = "payment:1512345678:EFT0001"
	if r := ingestPaying(t, s, "a.835", Fixture(t, "835_canonical.x12"), "ledger", "audit"); r.Sets[0].Outcome != inbox.Processed {
		t.Fatalf("first: %+v", r.Sets)
	}
	regenerated := Fixture(t, "835_regenerated.x12")
	if r := ingestPaying(t, s, "b.835", regenerated, "audit", "ledger"); r.Sets[0].Outcome != inbox.BusinessDuplicate ||
		len(r.Sets[0].EffectKeys) != 0 {
		t.Errorf("sent again after the route was reordered: %+v", r.Sets)
	}
	again := renumbered(regenerated, "202", "404")
	if r := ingestPaying(t, s, "c.835", again, "archive", "audit", "ledger"); r.Sets[0].Outcome != inbox.Processed ||
		!slices.Equal(r.Sets[0].EffectKeys, []string{pay}) {
		t.Errorf("sent again to a sink put first: %+v", r.Sets)
	}
	if got := rowsByKey(t, s)[pay]; !slices.Equal(got, []string{"archive", "audit", "ledger"}) {
		t.Errorf("the payment's rows are at %v, want one at each of ledger, audit, archive", got)
	}
	rows, err := s.Claim(context.Background(), t0.Add(time.Minute), []string{"ledger", "audit", "archive"}, 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, row := range rows {
		if row.Kind == process.KindPayment {
			n++
			if m := row.Message(); m.EffectKey != pay {
				t.Errorf("%s's request carries Idempotency-Key %q, want %q", row.Sink, m.EffectKey, pay)
			}
		}
	}
	if n != 3 {
		t.Errorf("claimed %d payment rows, want 3", n)
	}
}

// LegacyRow is an outbox row as a store migrated before 0014 keeps it:
// an effect's row at a further sink of its route under "@SINK:" and the
// effect key.
type LegacyRow struct {
	Key, Sink, Status string
	// Effect gives the row's kind, ordering key, payload and hash.
	Effect outbox.Effect
}

// LegacyMultiSinkRows are the rows a driver's upgrade test writes into a
// store migrated before 0014 and then migrates with CheckMultiSinkUpgrade:
// 835_canonical.x12's payment delivered at ledger (its route's first sink,
// the bare key) and pending at audit ("@audit:"); and two payments that
// have two rows at audit, the bare key's and an "@audit:" one (the old
// keying's double delivery, after a route's order changed), the second
// row pending for one and delivered for the other.
func LegacyMultiSinkRows(t *testing.T) []LegacyRow {
	t.Helper()
	e, _ := legacyEffects(t)
	twice := func(key string) outbox.Effect { o := e; o.Key, o.OrderingKey, o.Hash = key, key, "h-"+key; return o }
	return []LegacyRow{
		{e.Key, "ledger", outbox.StatusDelivered, e},
		{"@audit:" + e.Key, "audit", outbox.StatusPending, e},
		{"payment:1:TWICE-PENDING", "audit", outbox.StatusDelivered, twice("payment:1:TWICE-PENDING")},
		{"@audit:payment:1:TWICE-PENDING", "audit", outbox.StatusPending, twice("payment:1:TWICE-PENDING")},
		{"payment:1:TWICE-DELIVERED", "audit", outbox.StatusDelivered, twice("payment:1:TWICE-DELIVERED")},
		{"@audit:payment:1:TWICE-DELIVERED", "audit", outbox.StatusDelivered, twice("payment:1:TWICE-DELIVERED")},
	}
}

// CheckMultiSinkUpgrade checks s, holding LegacyMultiSinkRows (ids 1 to 6
// in order) and migrated past 0014: every further sink's row holds the
// effect key itself; the second pending row of a payment at one sink is
// discarded, its old key kept, the delivered one left as it was; the
// canonical payment sent again under new control numbers through the route
// reordered is a business duplicate at both sinks; and audit's pending row
// is claimed and carries the effect key as its Idempotency-Key, as it did.
func CheckMultiSinkUpgrade(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	legacy := LegacyMultiSinkRows(t)
	pay := legacy[0].Key
	want := []struct{ key, status string }{
		{pay, outbox.StatusDelivered}, {pay, outbox.StatusPending},
		{"payment:1:TWICE-PENDING", outbox.StatusDelivered}, {"@audit:payment:1:TWICE-PENDING", outbox.StatusDiscarded},
		{"payment:1:TWICE-DELIVERED", outbox.StatusDelivered}, {"@audit:payment:1:TWICE-DELIVERED", outbox.StatusDelivered},
	}
	for i, w := range want {
		row, err := s.GetOutbox(ctx, int64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if row.EffectKey != w.key || row.Status != w.status || row.Sink != legacy[i].Sink {
			t.Errorf("row %d: %s at %s %s, want %s %s", i+1, row.EffectKey, row.Sink, row.Status, w.key, w.status)
		}
		if w.status == outbox.StatusDiscarded && !strings.Contains(row.LastError, "migration 0014") {
			t.Errorf("row %d discarded without a word: %q", i+1, row.LastError)
		}
	}
	r := ingestPaying(t, s, "b.835", Fixture(t, "835_regenerated.x12"), "audit", "ledger")
	if o := r.Sets[0]; o.Outcome != inbox.BusinessDuplicate || len(o.EffectKeys) != 0 {
		t.Errorf("the payment sent again after the upgrade, its route reordered: %+v", r.Sets)
	}
	rows, err := s.Claim(ctx, t0.Add(time.Minute), []string{"audit", "ledger"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var claimed []string
	for _, row := range rows {
		if row.Kind == process.KindPayment {
			claimed = append(claimed, row.Sink+" "+row.Message().EffectKey)
		}
	}
	if !slices.Equal(claimed, []string{"audit " + pay}) {
		t.Errorf("payment rows claimed %v, want audit's under %s alone", claimed, pay)
	}
}
