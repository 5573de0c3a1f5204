package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/x12gen"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testPrunePayloads: once retention.payloads has passed, a delivered
// row's payload is replaced by its residue (payer, trace, amount; no
// claim or patient) and its attempts deleted, in batches; reconciliation
// totals what it totalled before; dead and undelivered rows keep their
// payloads; a row pruned once is not read again.
func testPrunePayloads(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 3)
	pays, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(pays) != 3 {
		t.Fatalf("claim: %d %v", len(pays), err)
	}
	for _, r := range pays[:2] {
		if lost, err := s.CompleteMany(ctx, []outbox.Completion{{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 200,
			Attempt: attempt(t0, 200, "2xx")}}, t0); err != nil || len(lost) != 0 {
			t.Fatalf("deliver: %v %v", lost, err)
		}
		if len(attemptsOf(t, s, r.ID)) != 1 {
			t.Fatalf("row %d: no attempt recorded", r.ID)
		}
	}
	dead := pays[2]
	if err := s.Dead(ctx, dead.ID, dead.LeaseToken, t0, outbox.Failure{HTTPStatus: 400, Error: "refused",
		Attempt: attempt(t0, 400, "4xx")}); err != nil {
		t.Fatal(err)
	}
	before := totals(t, s)
	whole := map[int64][]byte{}
	for _, r := range pays {
		got, err := s.GetOutbox(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		whole[r.ID] = got.Payload
	}

	if n, err := s.PrunePayloads(ctx, t0, 1); err != nil || n != 0 {
		t.Fatalf("prune of rows finished at the cutoff: %d %v", n, err)
	}
	if n, err := s.PrunePayloads(ctx, t0.Add(time.Second), 1); err != nil || n != 2 {
		t.Fatalf("prune in batches of one: %d %v, want the 2 delivered rows", n, err)
	}
	for _, r := range pays[:2] {
		got, err := s.GetOutbox(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var kept map[string]json.RawMessage
		if err := json.Unmarshal(got.Payload, &kept); err != nil {
			t.Fatalf("residue of row %d: %v: %s", r.ID, err, got.Payload)
		}
		var orig map[string]json.RawMessage
		if err := json.Unmarshal(whole[r.ID], &orig); err != nil {
			t.Fatal(err)
		}
		if string(kept["pruned"]) != "true" || len(kept["claims"]) != 0 || len(orig["claims"]) == 0 {
			t.Errorf("row %d after pruning keeps %s", r.ID, got.Payload)
		}
		for _, f := range []string{"payer_id", "trace_number", "amount"} {
			if len(orig[f]) == 0 || !bytes.Equal(kept[f], orig[f]) {
				t.Errorf("row %d: %s %s after pruning, %s before", r.ID, f, kept[f], orig[f])
			}
		}
		if got.Status != outbox.StatusDelivered {
			t.Errorf("row %d: %s after pruning", r.ID, got.Status)
		}
		if got.InboxKey != "" || got.OrderingKey != "" || got.EffectKey == "" || got.CorrelationID == "" {
			t.Errorf("row %d after pruning: inbox key %q, ordering key %q (want both gone), effect key %q, correlation id %q",
				r.ID, got.InboxKey, got.OrderingKey, got.EffectKey, got.CorrelationID)
		}
		if atts, err := s.Attempts(ctx, r.ID); err != nil || len(atts) != 0 {
			t.Errorf("row %d: %d attempts after pruning (%v)", r.ID, len(atts), err)
		}
	}
	if got, _ := s.GetOutbox(ctx, dead.ID); !bytes.Equal(got.Payload, whole[dead.ID]) {
		t.Errorf("the dead row's payload changed: %s", got.Payload)
	}
	if atts, err := s.Attempts(ctx, dead.ID); err != nil || len(atts) == 0 {
		t.Errorf("the dead row lost its attempts (%v)", err)
	}
	if after := totals(t, s); after != before || !strings.Contains(before, "delivered") {
		t.Errorf("what reconciliation totals\nbefore pruning %s\nafter          %s", before, after)
	}
	if n, err := s.PrunePayloads(ctx, t0.Add(time.Hour), 100); err != nil || n != 0 {
		t.Errorf("a second pass: %d %v, want none", n, err)
	}
}

// totals returns what reconciliation reads of each payment row: its
// effect key, sink, status, payer and amount, one line a row, in order.
func totals(t *testing.T, s store.Store) string {
	t.Helper()
	f, err := store.ReadFacts(context.Background(), s, time.Unix(0, 0), t0)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range f.Enqueued {
		if e.PayerID == "" || e.Amount == "" {
			t.Fatalf("payment %s: payer %q, amount %q", e.EffectKey, e.PayerID, e.Amount)
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s %s", e.EffectKey, e.Sink, e.Status, e.PayerID, e.Amount))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// testPrunedClaimKeepsItsOrderingKey: pruning a delivered claim event's
// payload leaves its ordering key, which later claim events of the claim
// (the 277CA's lookup, DeadFilter.Passed) read, and clears its inbox key
// as a payment's.
func testPrunedClaimKeepsItsOrderingKey(t *testing.T, s store.Store) {
	ctx := context.Background()
	var b bytes.Buffer
	x12gen.Claims{Control: 90, Claims: 1, IDPrefix: "PRUNED-", Frequency: "1"}.Write(&b)
	mustIngest(t, s, "pruned.837", b.Bytes())
	rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var claim outbox.Row
	for _, r := range rows {
		if r.Kind == process.KindClaim {
			claim = r
		}
		if lost, err := s.CompleteMany(ctx, []outbox.Completion{{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 200,
			Attempt: attempt(t0, 200, "2xx")}}, t0); err != nil || len(lost) != 0 {
			t.Fatalf("deliver: %v %v", lost, err)
		}
	}
	if claim.ID == 0 || claim.OrderingKey == "" {
		t.Fatalf("no claim event with an ordering key among %d rows", len(rows))
	}
	if _, err := s.PrunePayloads(ctx, t0.Add(time.Second), 100); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetOutbox(ctx, claim.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.OrderingKey != claim.OrderingKey || got.InboxKey != "" {
		t.Errorf("pruned claim event: ordering key %q (was %q), inbox key %q (want it gone)", got.OrderingKey,
			claim.OrderingKey, got.InboxKey)
	}
}
