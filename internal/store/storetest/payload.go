package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testPayloadBytesReadBack: an effect's payload is read back byte for byte
// as it was written (spacing, key order, number spelling kept), whether
// it came with a set, as an acknowledgment or as a delivery.dead event,
// and whether it is read by a claim, by id, from the dead letters or by
// reconciliation.
func testPayloadBytesReadBack(t *testing.T, s store.Store) {
	ctx := context.Background()
	const (
		payment = `{"trace": "T1",  "amount":1.50, "b":[1, 2.0],"a":{"z":null}}`
		ack     = `{ "ack" : "999", "sets":[ ] }`
		event   = `{"outbox_id" :1,"note":"caf\u00e9 \u2028"}`
	)
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "payload.835", Size: 1, MTime: t0,
		SHA256: "sha-payload", CorrelationID: store.NewCorrelationID(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Rollback()
	if err := ing.AddSet(ctx, inbox.SetRecord{Key: "x12:P:ZZ:A:ZZ:B:000000001:A:B:1:835:0001", ContentHash: "h1",
		Type: "835", Effects: []outbox.Effect{{Kind: "payment.posted", Key: "payment:1:T1", OrderingKey: "payment:1",
			Sink: "ledger", Payload: json.RawMessage(payment), Hash: "e1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := ing.AddAck(ctx, outbox.Effect{Kind: "ack.999", Key: "ack999:1", OrderingKey: "ack999:1", Sink: "ledger",
		Payload: json.RawMessage(ack), Hash: "a1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	want := map[string]string{"payment:1:T1": payment, "ack999:1": ack}
	for _, r := range rows {
		if string(r.Payload) != want[r.EffectKey] {
			t.Errorf("claimed %s: payload %s, want %s", r.EffectKey, r.Payload, want[r.EffectKey])
		}
		if got, err := s.GetOutbox(ctx, r.ID); err != nil || string(got.Payload) != want[r.EffectKey] {
			t.Errorf("outbox row %s: payload %s (%v), want %s", r.EffectKey, got.Payload, err, want[r.EffectKey])
		}
	}
	facts, err := store.ReadFacts(ctx, s, t0.Add(-time.Hour), t0.Add(-time.Hour))
	// Its set has no summary: reconciliation reads the amount from the
	// payload, as written.
	if err != nil || len(facts.Enqueued) != 1 || facts.Enqueued[0].Amount != "1.50" {
		t.Fatalf("reconcile facts: %+v %v, want the payment's amount as written", facts.Enqueued, err)
	}
	pay := rows[0]
	if pay.EffectKey != "payment:1:T1" {
		pay = rows[1]
	}
	if err := s.Dead(ctx, pay.ID, pay.LeaseToken, t0, outbox.Failure{HTTPStatus: 400, Error: "HTTP 400",
		DeadEvent: &outbox.DeadEvent{Sink: "chat", Payload: json.RawMessage(event)}}); err != nil {
		t.Fatal(err)
	}
	dead, err := s.ListDead(ctx, outbox.DeadFilter{}, 10)
	if err != nil || len(dead) != 1 || string(dead[0].Payload) != payment {
		t.Fatalf("dead letters: %+v %v, want the payment with its payload as written", dead, err)
	}
	evs, err := s.Claim(ctx, t0, []string{"chat"}, 10, time.Minute)
	if err != nil || len(evs) != 1 || evs[0].Kind != outbox.KindDeliveryDead || string(evs[0].Payload) != event {
		t.Fatalf("delivery.dead event: %+v %v, want its payload as written", evs, err)
	}
}

// testRunOfSetsMixedOutcomes: one ingestion's consecutive sets get, each
// in file order, the outcome it would get alone, when the run mixes new
// sets with a duplicate of an earlier file, a business duplicate, a set
// repeated within the run and a rejection; the effects inserted are
// numbered in file order.
func testRunOfSetsMixedOutcomes(t *testing.T, s store.Store) {
	ctx := context.Background()
	pay := func(trace string) []outbox.Effect {
		return []outbox.Effect{{Kind: "payment.posted", Key: "payment:1:" + trace, OrderingKey: "payment:1:" + trace,
			Sink: "ledger", Payload: json.RawMessage(`{"trace":"` + trace + `"}`), Hash: "e-" + trace}}
	}
	key := func(n int) string { return fmt.Sprintf("x12:P:ZZ:A:ZZ:B:%09d:A:B:1:835:0001", n) }
	ingest := func(path string, sets ...inbox.SetRecord) *inbox.IngestResult {
		t.Helper()
		ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: path, Size: 1, MTime: t0,
			SHA256: "sha-" + path, CorrelationID: store.NewCorrelationID(), Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		defer ing.Rollback()
		for _, r := range sets {
			if err := ing.AddSet(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		res, err := ing.Commit(ctx, inbox.FileIngested, "")
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ingest("first.835", inbox.SetRecord{Key: key(1), ContentHash: "h1", Type: "835", Effects: pay("T1")})
	res := ingest("second.835",
		inbox.SetRecord{Key: key(2), ContentHash: "h2", Type: "835", Effects: pay("T2")},
		inbox.SetRecord{Key: key(1), ContentHash: "h1", Type: "835", Effects: pay("T1")},
		inbox.SetRecord{Key: key(3), ContentHash: "h3", Type: "835", Effects: pay("T1")},
		inbox.SetRecord{Key: key(4), ContentHash: "h4", Type: "835", Effects: pay("T4")},
		inbox.SetRecord{Key: key(4), ContentHash: "h4", Type: "835", Effects: pay("T4")},
		inbox.SetRecord{Key: key(5), ContentHash: "h5", Type: "835", Rejected: true, Reason: "bad", Effects: pay("T5")},
		inbox.SetRecord{Key: key(6), ContentHash: "h6", Type: "835", Effects: pay("T6")},
	)
	want := []inbox.Outcome{inbox.Processed, inbox.Duplicate, inbox.BusinessDuplicate, inbox.Processed,
		inbox.Duplicate, inbox.Rejected, inbox.Processed}
	if len(res.Sets) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(res.Sets), len(want), res.Sets)
	}
	for i, r := range res.Sets {
		if r.Outcome != want[i] {
			t.Errorf("set %d (%s): %s, want %s", i+1, r.Key, r.Outcome, want[i])
		}
	}
	if k := res.Sets[0].EffectKeys; len(k) != 1 || k[0] != "payment:1:T2" || len(res.Sets[2].EffectKeys) != 0 ||
		len(res.Sets[5].EffectKeys) != 0 {
		t.Errorf("effect keys: %+v", res.Sets)
	}
	rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range rows {
		order = append(order, r.EffectKey)
	}
	if fmt.Sprint(order) != "[payment:1:T1 payment:1:T2 payment:1:T4 payment:1:T6]" {
		t.Errorf("outbox rows in id order %v, want the payments in file order, none of the rejected set", order)
	}
}
