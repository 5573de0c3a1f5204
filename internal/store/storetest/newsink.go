package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testConflictNotPostedToANewSink: a payment key sent again with other
// amounts after a sink was put in its route is an effect conflict,
// quarantined: the new sink gets no row of the other amounts (the
// payment's other sink has the first amounts under the same
// Idempotency-Key), whether the new sink comes first or last, or the
// route moved to it alone.
func testConflictNotPostedToANewSink(t *testing.T, s store.Store) {
	const pay = "payment:1512345678:EFT0001"
	if r := ingestPaying(t, s, "a.835", Fixture(t, "835_canonical.x12"), "ledger"); r.Sets[0].Outcome != inbox.Processed {
		t.Fatalf("first: %+v", r.Sets)
	}
	other := renumbered(Fixture(t, "835_changed_content.x12"), "101", "303")
	r := ingestPaying(t, s, "c.835", other, "ledger", "audit")
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 {
		t.Errorf("other amounts under the payment key, audit put last in its route: %+v", r.Sets)
	}
	other2 := renumbered(other, "303", "505")
	r = ingestPaying(t, s, "d.835", other2, "archive", "ledger")
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 {
		t.Errorf("other amounts under the payment key, archive put first in its route: %+v", r.Sets)
	}
	other3 := renumbered(other, "303", "707")
	r = ingestPaying(t, s, "e.835", other3, "audit")
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 {
		t.Errorf("other amounts under the payment key, its route moved to audit alone: %+v", r.Sets)
	}
	if got := rowsByKey(t, s)[pay]; !slices.Equal(got, []string{"ledger"}) {
		t.Errorf("the payment's rows are at %v, want ledger's alone: its other amounts are a conflict, not posted", got)
	}
}

// testRouteOrdersConcurrently: replicas whose routes list a payment's
// sinks in opposite orders ingest the same payment at once, each under its
// own control numbers. One arrival posts it, once at each sink; every
// other is a business duplicate, and none fails: an effect's rows are
// written in sink-name order whatever its route's, so opposite orders do
// not deadlock (on PostgreSQL they did, more often than an ingest's three
// writes absorbed, before and after migration 0014).
func testRouteOrdersConcurrently(t *testing.T, s store.Store) {
	const n = 6
	base := Fixture(t, "835_regenerated.x12")
	outcomes := make([]inbox.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		data := renumbered(base, "202", fmt.Sprintf("%03d", 600+i))
		sinks := []string{"ledger", "audit", "archive"}
		if i%2 == 1 {
			slices.Reverse(sinks)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := Options(t, s)
			opts.Routes = map[string][]string{process.KindPayment: sinks, process.KindAck999: {"acks"},
				process.KindAckTA1: {"acks"}, process.KindClaim: {"ledger"}}
			path := fmt.Sprintf("r%d.835", i)
			r, err := inbox.Ingest(context.Background(), opts, inbox.FileInfo{Source: "test", Path: path,
				Size: int64(len(data)), MTime: t0, SHA256: "sha-" + path, CorrelationID: store.NewCorrelationID(), Now: t0},
				bytes.NewReader(data))
			errs[i] = err
			if err == nil {
				outcomes[i] = r.Sets[0].Outcome
			}
		}()
	}
	wg.Wait()
	posted := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("arrival %d: %v", i, errs[i])
			continue
		}
		switch outcomes[i] {
		case inbox.Processed:
			posted++
		case inbox.BusinessDuplicate:
		default:
			t.Errorf("arrival %d: %s", i, outcomes[i])
		}
	}
	if posted != 1 {
		t.Errorf("%d arrivals posted the payment, want 1", posted)
	}
	got := rowsByKey(t, s)["payment:1512345678:EFT0001"]
	slices.Sort(got)
	if !slices.Equal(got, []string{"archive", "audit", "ledger"}) {
		t.Errorf("the payment's rows are at %v, want one at each sink", got)
	}
}
