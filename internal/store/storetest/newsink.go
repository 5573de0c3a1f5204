package storetest

import (
	"bytes"
	"context"
	"slices"
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
	ingest := func(path string, data []byte, payments ...string) *inbox.Report {
		t.Helper()
		opts := Options(t, s)
		opts.Routes = map[string][]string{process.KindPayment: payments, process.KindAck999: {"acks"},
			process.KindAckTA1: {"acks"}, process.KindClaim: {"ledger"}}
		r, err := inbox.Ingest(context.Background(), opts,
			inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: t0, SHA256: "sha-" + path,
				CorrelationID: store.NewCorrelationID(), Now: t0}, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const pay = "payment:1512345678:EFT0001"
	if r := ingest("a.835", Fixture(t, "835_canonical.x12"), "ledger"); r.Sets[0].Outcome != inbox.Processed {
		t.Fatalf("first: %+v", r.Sets)
	}
	other := Fixture(t, "835_changed_content.x12")
	for _, rp := range [][2]string{{"000000101", "000000303"}, {"*101*X", "*303*X"}, {"GE*1*101", "GE*1*303"}} {
		other = bytes.ReplaceAll(other, []byte(rp[0]), []byte(rp[1]))
	}
	r := ingest("c.835", other, "ledger", "audit")
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 {
		t.Errorf("other amounts under the payment key, audit put last in its route: %+v", r.Sets)
	}
	other2 := bytes.ReplaceAll(other, []byte("000000303"), []byte("000000505"))
	other2 = bytes.ReplaceAll(bytes.ReplaceAll(other2, []byte("*303*X"), []byte("*505*X")), []byte("GE*1*303"), []byte("GE*1*505"))
	r = ingest("d.835", other2, "archive", "ledger")
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 {
		t.Errorf("other amounts under the payment key, archive put first in its route: %+v", r.Sets)
	}
	other3 := bytes.ReplaceAll(other, []byte("000000303"), []byte("000000707"))
	other3 = bytes.ReplaceAll(bytes.ReplaceAll(other3, []byte("*303*X"), []byte("*707*X")), []byte("GE*1*303"), []byte("GE*1*707"))
	r = ingest("e.835", other3, "audit")
	if o := r.Sets[0]; o.Outcome != inbox.Conflict || len(o.EffectKeys) != 0 {
		t.Errorf("other amounts under the payment key, its route moved to audit alone: %+v", r.Sets)
	}
	if got := rowsByKey(t, s)[pay]; !slices.Equal(got, []string{"ledger"}) {
		t.Errorf("the payment's rows are at %v, want ledger's alone: its other amounts are a conflict, not posted", got)
	}
}
