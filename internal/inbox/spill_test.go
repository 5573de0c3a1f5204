package inbox

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/outbox"
)

// TestSpillMovesToDiskAndKeepsOrder: records past spillInMemory go to a
// temporary file (unlinked at once, so nothing is left in the directory)
// and come back in order, every field included.
func TestSpillMovesToDiskAndKeepsOrder(t *testing.T) {
	dir := t.TempDir()
	sp := &spill{dir: dir}
	defer sp.Close()
	// Hex of pseudo-random bytes: a payload that packing does not shrink
	// below the size that moves the spill to disk.
	noise := make([]byte, 32<<10)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	payload := json.RawMessage(`{"x":"` + hex.EncodeToString(noise) + `"}`)
	const n = 2 * spillInMemory / (64 << 10)
	record := func(i int) spilled {
		if i%2 == 0 {
			return spilled{Set: &SetRecord{Key: fmt.Sprint("set", i), ContentHash: "h", Type: "835",
				Rejected: i%4 == 0, Reason: "r", Summary: json.RawMessage(`{"s":1}`), Effects: []outbox.Effect{
					{Kind: "payment.posted", Key: fmt.Sprint("pay", i), OrderingKey: "o", Sink: "ledger",
						Payload: payload, Hash: "hh"}}}}
		}
		if i%3 == 0 {
			return spilled{Set: &SetRecord{Key: fmt.Sprint("claimed", i), ContentHash: "h", Type: "835", Claimed: true}}
		}
		return spilled{Ack: &outbox.Effect{Kind: "ack.999", Key: fmt.Sprint("ack", i), UnlessConflictIn: "x12:P:",
			Payload: payload}}
	}
	for i := range n {
		if err := sp.put(record(i)); err != nil {
			t.Fatal(err)
		}
	}
	if sp.file == nil || sp.mem.Len() != 0 {
		t.Fatalf("%d records not spilled to a file (in memory: %d bytes)", n, sp.mem.Len())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("spill file visible in its directory: %v", left)
	}
	for range 2 { // a write may be tried again from the start
		rd, err := sp.reader()
		if err != nil {
			t.Fatal(err)
		}
		for i := range sp.n {
			rec, err := rd.next()
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			want := record(i)
			// Payloads come back packed, as the store keeps them.
			for _, e := range []*outbox.Effect{want.Ack} {
				if e != nil {
					e.Packed, e.Payload = outbox.PackPayload(e.Payload), nil
				}
			}
			if want.Set != nil {
				for j := range want.Set.Effects {
					e := &want.Set.Effects[j]
					e.Packed, e.Payload = outbox.PackPayload(e.Payload), nil
				}
			}
			if !reflect.DeepEqual(rec, want) {
				t.Fatalf("record %d: %+v, want %+v", i, rec, want)
			}
		}
		if _, err := rd.next(); err == nil {
			t.Fatal("a record past the last")
		}
	}
}

// TestSpillKeepsPayloadsPacked: the spill holds a payload packed and gives
// it back packed (Effect.Packed), the very bytes the store keeps, which
// unpack to the payload put.
func TestSpillKeepsPayloadsPacked(t *testing.T) {
	payload := []byte(`{"claims":[` + strings.Repeat(`{"charge":"100.00","paid":"75.00"},`, 50) + `{}]}`)
	sp := &spill{dir: t.TempDir()}
	defer sp.Close()
	e := outbox.Effect{Kind: "payment.posted", Key: "k", Sink: "ledger", Payload: payload}
	if err := sp.put(spilled{Set: &SetRecord{Key: "x12:K", Effects: []outbox.Effect{e}}}); err != nil {
		t.Fatal(err)
	}
	if err := sp.put(spilled{Ack: &e}); err != nil {
		t.Fatal(err)
	}
	if sp.mem.Len() >= 2*len(payload) {
		t.Fatalf("two records of a %d-byte payload spill %d bytes", len(payload), sp.mem.Len())
	}
	rd, err := sp.reader()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rec, err := rd.next()
		if err != nil {
			t.Fatal(err)
		}
		got := rec.Ack
		if rec.Set != nil {
			got = &rec.Set.Effects[0]
		}
		if got.Payload != nil || !bytes.Equal(got.Packed, outbox.PackPayload(payload)) {
			t.Fatalf("spilled effect: payload %q, packed %q", got.Payload, got.Packed)
		}
		if p, err := got.JSONPayload(); err != nil || !bytes.Equal(p, payload) {
			t.Fatalf("unpacked %q, %v", p, err)
		}
	}
}

// TestSpillPacksWithoutAllocatingPerPayload: packing a payload into the
// spill reuses the spill's buffer; a large file's payloads would
// otherwise each allocate a worst-case buffer (more than the payload)
// that the collector then has to reclaim.
func TestSpillPacksWithoutAllocatingPerPayload(t *testing.T) {
	payload := []byte(`{"claims":[` + strings.Repeat(`{"charge":"100.00","paid":"75.00"},`, 150) + `{}]}`)
	sp := &spill{dir: t.TempDir()}
	defer sp.Close()
	rec := spilled{Ack: &outbox.Effect{Kind: "payment.posted", Key: "k", Sink: "ledger", Payload: payload}}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := sp.put(rec); err != nil {
			t.Fatal(err)
		}
	})
	if allocs >= 1 {
		t.Errorf("%.2f allocations per spilled payload of %d bytes", allocs, len(payload))
	}
}
