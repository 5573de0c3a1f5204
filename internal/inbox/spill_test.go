package inbox

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/outbox"
)

// spillRecord is the i-th record of the spill tests: sets with and
// without effects, clean or not, claimed sets, acknowledgments, each payload the given.
func spillRecord(i int, payload json.RawMessage) spilled {
	if i%2 == 0 {
		return spilled{Set: &SetRecord{Key: fmt.Sprint("set", i), ContentHash: "h", Type: "835",
			Rejected: i%4 == 0, Clean: i%8 == 2, Reason: "r", Summary: json.RawMessage(`{"s":1}`), Effects: []outbox.Effect{
				{Kind: "payment.posted", Key: fmt.Sprint("pay", i), OrderingKey: "o", Sink: "ledger",
					Payload: payload, Hash: "hh"}}}}
	}
	if i%3 == 0 {
		return spilled{Set: &SetRecord{Key: fmt.Sprint("claimed", i), ContentHash: "h", Type: "835", Claimed: true}}
	}
	return spilled{Ack: &outbox.Effect{Kind: "ack.999", Key: fmt.Sprint("ack", i), UnlessConflictIn: "x12:P:",
		Payload: payload}}
}

// packed is rec as it reads back: payloads packed, as the store keeps
// them.
func packed(rec spilled) spilled {
	if rec.Ack != nil {
		rec.Ack.Packed, rec.Ack.Payload = outbox.PackPayload(rec.Ack.Payload), nil
	}
	if rec.Set != nil {
		for j := range rec.Set.Effects {
			e := &rec.Set.Effects[j]
			e.Packed, e.Payload = outbox.PackPayload(e.Payload), nil
		}
	}
	return rec
}

// noisePayload is a payload that packing does not shrink: hex of
// pseudo-random bytes.
func noisePayload(n int) json.RawMessage {
	noise := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	return json.RawMessage(`{"x":"` + hex.EncodeToString(noise) + `"}`)
}

// TestSpillPipesPastItsLimitAndKeepsOrder: records past the spill's limit
// go to the pipe its overflow returns, once, after the records kept in
// memory are handed over; read from both, they come back in order, every
// field included, and the stream ends where the records do.
func TestSpillPipesPastItsLimitAndKeepsOrder(t *testing.T) {
	payload := noisePayload(32 << 10)
	const limit = 1 << 20
	n := 3 * limit / (64 << 10)
	pr, pw := io.Pipe()
	got := make(chan []spilled, 1)
	overflows := 0
	sp := &spill{limit: limit}
	sp.overflow = func(mem []byte) (io.Writer, error) {
		overflows++
		if len(mem) == 0 || len(mem) > limit {
			t.Errorf("overflow with %d bytes in memory, limit %d", len(mem), limit)
		}
		go func() {
			rd := &spillReader{r: bufio.NewReader(io.MultiReader(bytes.NewReader(mem), pr))}
			var recs []spilled
			for {
				rec, err := rd.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Error(err)
					break
				}
				recs = append(recs, rec)
			}
			got <- recs
		}()
		return pw, nil
	}
	for i := range n {
		if err := sp.put(spillRecord(i, payload)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.flush(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	recs := <-got
	if overflows != 1 || !sp.piped || sp.mem.Len() != 0 {
		t.Fatalf("overflows %d, piped %v, %d bytes kept in memory", overflows, sp.piped, sp.mem.Len())
	}
	if len(recs) != n {
		t.Fatalf("%d records read, %d put", len(recs), n)
	}
	for i, rec := range recs {
		if want := packed(spillRecord(i, payload)); !reflect.DeepEqual(rec, want) {
			t.Fatalf("record %d: %+v, want %+v", i, rec, want)
		}
	}
	if _, err := sp.reader(); err == nil {
		t.Error("a piped spill read again")
	}
}

// TestSpillInMemoryReadsAgain: records within the limit stay in memory
// and read back, whole and in order, as often as a write is tried; a
// record cut short is an error, not the end of the records.
func TestSpillInMemoryReadsAgain(t *testing.T) {
	payload := noisePayload(1 << 10)
	sp := &spill{limit: DefaultPipeFrom, overflow: func([]byte) (io.Writer, error) {
		t.Fatal("overflow within the limit")
		return nil, nil
	}}
	const n = 100
	for i := range n {
		if err := sp.put(spillRecord(i, payload)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		rd, err := sp.reader()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			rec, err := rd.next()
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			if want := packed(spillRecord(i, payload)); !reflect.DeepEqual(rec, want) {
				t.Fatalf("record %d: %+v, want %+v", i, rec, want)
			}
		}
		if _, err := rd.next(); err != io.EOF {
			t.Fatalf("past the last record: %v, want io.EOF", err)
		}
	}
	cut := sp.mem.Bytes()[:sp.mem.Len()-3]
	rd := &spillReader{r: bufio.NewReader(bytes.NewReader(cut))}
	var err error
	for err == nil {
		_, err = rd.next()
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("records cut short: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestSpillKeepsPayloadsPacked: the spill holds a payload packed and gives
// it back packed (Effect.Packed), the very bytes the store keeps, which
// unpack to the payload put.
func TestSpillKeepsPayloadsPacked(t *testing.T) {
	payload := []byte(`{"claims":[` + strings.Repeat(`{"charge":"100.00","paid":"75.00"},`, 50) + `{}]}`)
	sp := &spill{}
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
	sp := &spill{}
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
