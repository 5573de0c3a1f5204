package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testDeadEventWithTransition: Dead with a DeadEvent inserts one pending
// delivery.dead row in its transaction, keyed by the row's death count
// (every death counts, with an event or without), for the event's sink,
// with the dead row's correlation id; a Dead whose lease was lost inserts
// nothing.
func testDeadEventWithTransition(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 1)
	ev := &outbox.DeadEvent{Sink: "chat", Payload: json.RawMessage(`{"outbox_id":1}`)}
	die := func(at time.Time, ev *outbox.DeadEvent) outbox.Row {
		t.Helper()
		r := claimOne(t, s, at)
		if err := s.Dead(ctx, r.ID, "stale", at, outbox.Failure{HTTPStatus: 400, DeadEvent: ev}); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("dead with a stale token: %v", err)
		}
		if err := s.Dead(ctx, r.ID, r.LeaseToken, at, outbox.Failure{HTTPStatus: 400, Error: "HTTP 400",
			Attempt: attempt(at, 400, "4xx"), DeadEvent: ev}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	events := func() []outbox.Row {
		var out []outbox.Row
		for id := int64(1); id < 50; id++ {
			if row, err := s.GetOutbox(ctx, id); err == nil && row.Kind == outbox.KindDeliveryDead {
				out = append(out, row)
			}
		}
		return out
	}
	r := die(t0, ev)
	got := events()
	if len(got) != 1 || got[0].Kind != outbox.KindDeliveryDead || got[0].EffectKey != fmt.Sprintf("delivery.dead:%d:1", r.ID) ||
		got[0].OrderingKey != fmt.Sprintf("delivery.dead:%d", r.ID) || got[0].CorrelationID != r.CorrelationID ||
		string(got[0].Payload) != `{"outbox_id": 1}` && string(got[0].Payload) != `{"outbox_id":1}` {
		t.Fatalf("events after the first death: %+v", got)
	}
	if got[0].Status != outbox.StatusPending || !got[0].CreatedAt.Equal(t0) || !got[0].NextAttemptAt.Equal(t0) {
		t.Errorf("event %s, created at %s, due %s; want pending since the death's time %s", got[0].Status,
			got[0].CreatedAt, got[0].NextAttemptAt, t0)
	}
	// A second death without an event counts; the third's event is :3.
	for i, e := range []*outbox.DeadEvent{nil, ev} {
		if n, err := s.Replay(ctx, outbox.DeadFilter{IDs: []int64{r.ID}}, t0); err != nil || n != 1 {
			t.Fatalf("replay %d: %d %v", i, n, err)
		}
		die(t0, e)
	}
	got = events()
	if len(got) != 2 || got[1].EffectKey != fmt.Sprintf("delivery.dead:%d:3", r.ID) {
		t.Fatalf("events after three deaths: %+v", got)
	}
}
