package process

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
)

// TestNoEffectsChangesNothingElse: sets an ingest already knows to be
// claimed (Config.NoEffects) get no effects, and nothing else changes:
// every set's status, reason, errors, problems and document, and every
// acknowledgment (its key carries the verdict of the group, which depends
// on the sets' content problems) are those of processing with effects.
func TestNoEffectsChangesNothingElse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "envelope", "testdata", "*.x12"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	withEffects := 0
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		process := func(noEffects bool) ([]*Set, []Effect) {
			cfg := Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 900}, Ack: ack.Options{Now: fixedNow}}
			if noEffects {
				cfg.NoEffects = func(ctx context.Context, f *envelope.File) (func(*envelope.Set) bool, error) {
					return func(*envelope.Set) bool { return true }, nil
				}
			}
			var sets []*Set
			var acks []Effect
			if _, err := File(context.Background(), bytes.NewReader(data), cfg, func(it Item) error {
				if it.Set != nil {
					sets = append(sets, it.Set)
				}
				if it.Ack != nil {
					acks = append(acks, *it.Ack)
				}
				return nil
			}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return sets, acks
		}
		full, fullAcks := process(false)
		skipped, skippedAcks := process(true)
		if !reflect.DeepEqual(fullAcks, skippedAcks) {
			t.Errorf("%s: acknowledgments differ:\n%+v\n%+v", name, fullAcks, skippedAcks)
		}
		if len(full) != len(skipped) {
			t.Fatalf("%s: %d sets, %d without effects", name, len(full), len(skipped))
		}
		for i := range full {
			if len(full[i].Effects) > 0 {
				withEffects++
			}
			if len(skipped[i].Effects) != 0 {
				t.Errorf("%s set %d: effects built: %+v", name, i, skipped[i].Effects)
			}
			f := *full[i]
			f.Effects = nil
			if !reflect.DeepEqual(&f, skipped[i]) {
				t.Errorf("%s set %d differs:\n%+v\n%+v", name, i, &f, skipped[i])
			}
		}
	}
	if withEffects == 0 {
		t.Fatal("no fixture has a set with effects")
	}
}
