package inbox

import (
	"encoding/json"
	"fmt"
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
	payload := json.RawMessage(`{"x":"` + strings.Repeat("a", 64<<10) + `"}`)
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
			if want := record(i); !reflect.DeepEqual(rec, want) {
				t.Fatalf("record %d: %+v, want %+v", i, rec, want)
			}
		}
		if _, err := rd.next(); err == nil {
			t.Fatal("a record past the last")
		}
	}
}
