package inbox

import (
	"encoding/gob"
	"encoding/json"
	"fmt"
	"path/filepath"
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
	enc := gob.NewEncoder(sp)
	payload := json.RawMessage(`{"x":"` + strings.Repeat("a", 64<<10) + `"}`)
	const n = 2 * spillInMemory / (64 << 10)
	for i := range n {
		var rec spilled
		if i%2 == 0 {
			rec.Set = &SetRecord{Key: fmt.Sprint("set", i), ContentHash: "h", Effects: []outbox.Effect{
				{Kind: "payment.posted", Key: fmt.Sprint("pay", i), Payload: payload}}}
		} else {
			rec.Ack = &outbox.Effect{Kind: "ack.999", Key: fmt.Sprint("ack", i), UnlessConflictIn: "x12:P:", Payload: payload}
		}
		if err := sp.put(enc, rec); err != nil {
			t.Fatal(err)
		}
	}
	if sp.file == nil || sp.mem.Len() != 0 {
		t.Fatalf("%d records not spilled to a file (in memory: %d bytes)", n, sp.mem.Len())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("spill file visible in its directory: %v", left)
	}
	rd, err := sp.reader()
	if err != nil {
		t.Fatal(err)
	}
	dec := gob.NewDecoder(rd)
	for i := range sp.n {
		var rec spilled
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		switch {
		case i%2 == 0 && (rec.Set == nil || rec.Set.Key != fmt.Sprint("set", i) || len(rec.Set.Effects[0].Payload) != len(payload)):
			t.Fatalf("record %d: %+v", i, rec)
		case i%2 == 1 && (rec.Ack == nil || rec.Ack.Key != fmt.Sprint("ack", i) || rec.Ack.UnlessConflictIn != "x12:P:"):
			t.Fatalf("record %d: %+v", i, rec)
		}
	}
}
