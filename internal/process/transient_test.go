package process

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestTransientChangesNothing: with Config.Transient, every set's
// document and effect payloads are read and written into memory reused
// from set to set, and everything emit sees while it runs is what
// processing without it shows: every set (status, problems, document,
// effects and their payloads, byte for byte) and every acknowledgment,
// for the fixtures and for generated files of many 835 and 837 sets of
// differing sizes, where a set reusing a longer one's memory would show
// what the longer one left there.
func TestTransientChangesNothing(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "envelope", "testdata", "*.x12"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	inputs := map[string][]byte{}
	for _, name := range files {
		if inputs[filepath.Base(name)], err = os.ReadFile(name); err != nil {
			t.Fatal(err)
		}
	}
	var remit bytes.Buffer
	for i, shape := range []x12gen.Remit{
		{Control: 1, SetsPerGroup: 3, ClaimsPerSet: 4, LinesPerClaim: 3, Trace: "A"},
		{Control: 2, SetsPerGroup: 2, ClaimsPerSet: 1, Trace: "B"},
		{Control: 3, SetsPerGroup: 2, ClaimsPerSet: 6, LinesPerClaim: 2, Trace: "C"},
	} {
		if _, err := shape.Write(&remit); err != nil {
			t.Fatalf("remit %d: %v", i, err)
		}
	}
	inputs["generated 835s"] = remit.Bytes()
	var claims bytes.Buffer
	for i, shape := range []x12gen.Claims{
		{Control: 1, Claims: 5, IDPrefix: "LONGER-CLAIM-ID-"},
		{Control: 2, Claims: 1, IDPrefix: "S"},
		{Control: 3, Claims: 3, IDPrefix: "M", Frequency: "7"},
	} {
		if err := shape.Write(&claims); err != nil {
			t.Fatalf("claims %d: %v", i, err)
		}
	}
	inputs["generated 837s"] = claims.Bytes()

	process := func(data []byte, transient bool) ([]taken, []Effect) {
		return takeAll(t, data, Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 900},
			Ack: ack.Options{Now: fixedNow}, Transient: transient})
	}
	payments, claimEvents := 0, 0
	for name, data := range inputs {
		want, wantAcks := process(data, false)
		got, gotAcks := process(data, true)
		if !reflect.DeepEqual(wantAcks, gotAcks) {
			t.Errorf("%s: acknowledgments differ:\n%+v\n%+v", name, wantAcks, gotAcks)
		}
		if len(want) != len(got) {
			t.Fatalf("%s: %d sets, %d transient", name, len(want), len(got))
		}
		for i := range want {
			if !reflect.DeepEqual(want[i], got[i]) {
				t.Errorf("%s set %d differs:\n%+v\n%+v", name, i, want[i], got[i])
			}
			for _, e := range want[i].set.Effects {
				switch e.Kind {
				case KindPayment:
					payments++
				case KindClaim:
					claimEvents++
				}
			}
		}
	}
	if payments < 7 || claimEvents < 9 {
		t.Fatalf("%d payments and %d claim events compared: the generated files were not read", payments, claimEvents)
	}
}

// taken is a set as emit saw it: its documents encoded and its effects'
// payloads copied while emit ran (they may be reused after it).
type taken struct {
	set  Set
	docs [][]byte
}

// takeAll processes data with cfg and returns its sets, taken, and its
// acknowledgments.
func takeAll(t *testing.T, data []byte, cfg Config) ([]taken, []Effect) {
	t.Helper()
	var sets []taken
	var acks []Effect
	if _, err := File(context.Background(), bytes.NewReader(data), cfg, func(it Item) error {
		if it.Set != nil {
			tk := taken{set: *it.Set}
			if tk.set.Payment != nil {
				tk.docs = append(tk.docs, tk.set.Payment.AppendJSON(nil))
			}
			for i := range tk.set.Claims {
				tk.docs = append(tk.docs, tk.set.Claims[i].AppendJSON(nil))
			}
			tk.set.Payment, tk.set.Claims = nil, nil
			tk.set.Effects = append([]Effect(nil), tk.set.Effects...)
			for i := range tk.set.Effects {
				tk.set.Effects[i].Payload = bytes.Clone(tk.set.Effects[i].Payload)
			}
			sets = append(sets, tk)
		}
		if it.Ack != nil {
			acks = append(acks, *it.Ack)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return sets, acks
}
