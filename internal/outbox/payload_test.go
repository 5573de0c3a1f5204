package outbox

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

func TestPackedPayloadReadsBackExactly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.SliceOf(rapid.Byte()).Draw(t, "payload")
		packed := PackPayload(p)
		if len(p) > 0 && packed[0] != packedTag {
			t.Fatalf("packed payload starts with %#x", packed[0])
		}
		got, err := UnpackPayload(packed)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, p) {
			t.Fatalf("read back %q, want %q", got, p)
		}
	})
}

// TestAppendPackedPayloadIsPackPayload: a payload appended packed to any
// buffer is the buffer, then what PackPayload gives.
func TestAppendPackedPayloadIsPackPayload(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dst := rapid.SliceOf(rapid.Byte()).Draw(t, "dst")
		dst = append(make([]byte, 0, len(dst)+rapid.IntRange(0, 1<<14).Draw(t, "room")), dst...)
		p := rapid.SliceOf(rapid.Byte()).Draw(t, "payload")
		want := append(bytes.Clone(dst), PackPayload(p)...)
		if got := AppendPackedPayload(dst, p); !bytes.Equal(got, want) {
			t.Fatalf("appended % x, want % x", got, want)
		}
	})
}

func TestPayloadStoredBeforePackingReadsAsStored(t *testing.T) {
	for _, p := range []string{`{"amount":"600.00"}`, `[1,2]`, `"x"`, ` {"a":1}`, ``} {
		got, err := UnpackPayload([]byte(p))
		if err != nil || string(got) != p {
			t.Fatalf("UnpackPayload(%q) = %q, %v", p, got, err)
		}
	}
}

func TestPackedPayloadIsSmaller(t *testing.T) {
	claim := map[string]any{"patient_control_number": "PCN1-1", "charge": "100.00", "paid": "75.00",
		"lines": []map[string]string{{"procedure_qualifier": "HC", "procedure": "99213", "charge": "100.00"}}}
	claims := make([]any, 8)
	for i := range claims {
		claims[i] = claim
	}
	p, _ := json.Marshal(map[string]any{"claims": claims})
	if n := len(PackPayload(p)); n*3 > len(p) {
		t.Fatalf("a payload of 8 alike claims packs to %d of %d bytes", n, len(p))
	}
}

func TestCorruptPackedPayloadIsAnError(t *testing.T) {
	if _, err := UnpackPayload([]byte{packedTag, 0xff, 0xff, 0xff}); err == nil {
		t.Fatal("a corrupt packed payload read without error")
	}
}

// TestPayloadResidueKeepsTotalsOnly: the residue of a payment keeps the
// fields reconciliation and an operator read, exactly as written, and
// nothing else; a payload that does not decode keeps only the mark.
func TestPayloadResidueKeepsTotalsOnly(t *testing.T) {
	p := []byte(`{"envelope_key":"k","payer_id":"1512345678","trace_number":"EFT1","amount":"1000.10",` +
		`"claims":[{"patient":{"last_name":"DOE"},"amount":"5.00"}]}`)
	for _, stored := range [][]byte{p, PackPayload(p)} {
		got, err := UnpackPayload(PayloadResidue(stored))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"amount":"1000.10","payer_id":"1512345678","pruned":true,"trace_number":"EFT1"}`
		if string(got) != want {
			t.Errorf("residue %s, want %s", got, want)
		}
	}
	got, err := UnpackPayload(PayloadResidue([]byte{packedTag, 0xff, 0xff}))
	if err != nil || string(got) != `{"pruned":true}` {
		t.Errorf("residue of a corrupt payload: %s %v", got, err)
	}
}
