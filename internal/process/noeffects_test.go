package process

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestNoEffectsChangesNothingElse: sets an ingest already knows to be
// claimed (Config.Claims) get no effects, and nothing else changes:
// every set's status, reason, errors, problems and document, and every
// acknowledgment (its key carries the verdict of the group, which depends
// on the sets' content problems) are those of processing with effects.
// A marked set's document is read by a reused parser and valid only while
// emit runs, so each document is taken (encoded) there.
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
		process := func(noEffects bool) ([]*Set, [][]byte, []Effect) {
			cfg := Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 900}, Ack: ack.Options{Now: fixedNow}}
			if noEffects {
				cfg.Claims = func(context.Context, []string) (func(*envelope.Set) Known, error) {
					return func(*envelope.Set) Known { return Claimed }, nil
				}
			}
			var sets []*Set
			var docs [][]byte
			var acks []Effect
			if _, err := File(context.Background(), bytes.NewReader(data), cfg, func(it Item) error {
				if it.Set != nil {
					set := *it.Set
					var doc []byte
					if set.Payment != nil {
						doc = set.Payment.AppendJSON(doc)
					}
					for i := range set.Claims {
						doc = set.Claims[i].AppendJSON(doc)
					}
					set.Payment, set.Claims = nil, nil
					sets, docs = append(sets, &set), append(docs, doc)
				}
				if it.Ack != nil {
					acks = append(acks, *it.Ack)
				}
				return nil
			}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return sets, docs, acks
		}
		full, fullDocs, fullAcks := process(false)
		skipped, skippedDocs, skippedAcks := process(true)
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
			if !bytes.Equal(fullDocs[i], skippedDocs[i]) {
				t.Errorf("%s set %d: documents differ:\n%s\n%s", name, i, fullDocs[i], skippedDocs[i])
			}
		}
	}
	if withEffects == 0 {
		t.Fatal("no fixture has a set with effects")
	}
}

// TestNoEffectsKeepsProblemsPastTheParsersNextSet: the problems of a
// marked set, read by a parser reused for the next set, are what its
// group's 999 reports when the group ends: a bad amount in the first set
// and a bad date in the second of a three-set group give the same 999
// (their IK4 values included) with and without Claims.
func TestNoEffectsKeepsProblemsPastTheParsersNextSet(t *testing.T) {
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 3, ClaimsPerSet: 2}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	data := bytes.Replace(buf.Bytes(), []byte("CLP*PCN1-1*1*100.00"), []byte("CLP*PCN1-1*1*1X0.00"), 1)
	data = bytes.Replace(data, []byte("DTM*232*20261101"), []byte("DTM*232*2026110A"), 3) // the second set's first claim
	acks := func(noEffects bool) []Effect {
		cfg := Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 900}, Ack: ack.Options{Now: fixedNow}}
		if noEffects {
			cfg.Claims = func(context.Context, []string) (func(*envelope.Set) Known, error) {
				return func(*envelope.Set) Known { return Claimed }, nil
			}
		}
		var out []Effect
		if _, err := File(context.Background(), bytes.NewReader(data), cfg, func(it Item) error {
			if it.Ack != nil {
				out = append(out, *it.Ack)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	full, skipped := acks(false), acks(true)
	if len(full) == 0 || !reflect.DeepEqual(full, skipped) {
		t.Fatalf("acknowledgments differ:\n%s\n%s", full, skipped)
	}
	var ev AckEvent
	if err := json.Unmarshal(full[0].Payload, &ev); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1X0.00", "2026110A", "IK5*R"} {
		if !strings.Contains(ev.X12, want) {
			t.Errorf("the 999 lacks %q:\n%s", want, ev.X12)
		}
	}
}

// TestCleanClaimedSetsAreNotRead: a set claimed by a clean set of the same
// content (ClaimedClean) is not read, and nothing that a full processing
// shows changes: every set's status, reason, errors and problems, and
// every acknowledgment (whose key carries its group's verdict). The
// fixtures hold sets with problems, rejections and unbalanced payments
// beside clean ones; the clean ones alone are marked, by content hash as
// an ingest's lookup would mark them, and those alone are not read.
func TestCleanClaimedSetsAreNotRead(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "envelope", "testdata", "*.x12"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 4, ClaimsPerSet: 2}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	// The second set with a bad date (a problem that does not reject), the
	// third with a bad amount (one that does), the fourth unbalanced.
	mixed := buf.Bytes()
	second := bytes.Index(mixed, []byte("CLP*PCN2-1*"))
	mixed = append(mixed[:second:second], bytes.Replace(mixed[second:], []byte("DTM*232*20261101"),
		[]byte("DTM*232*2026110A"), 1)...)
	mixed = bytes.Replace(mixed, []byte("CLP*PCN3-1*1*100.00"), []byte("CLP*PCN3-1*1*1X0.00"), 1)
	mixed = bytes.Replace(mixed, []byte("CLP*PCN4-1*1*100.00*75.00"), []byte("CLP*PCN4-1*1*100.00*76.00"), 1)
	inputs := map[string][]byte{"mixed.835": mixed}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = data
	}
	kinds := map[string]int{}
	for name, data := range inputs {
		full, fullAcks := processMarked(t, data, nil)
		clean := map[string]bool{}
		for _, s := range full {
			if s.Clean() && (s.Payment != nil || s.Claims != nil) {
				clean[s.ContentHash] = true
			}
			switch {
			case s.Clean():
				kinds["clean"]++
			case s.Status == Rejected:
				kinds["rejected"]++
			case len(s.Problems) > 0:
				kinds["problems"]++
			default:
				kinds["unbalanced"]++
			}
		}
		marked, markedAcks := processMarked(t, data, clean)
		if !reflect.DeepEqual(fullAcks, markedAcks) {
			t.Errorf("%s: acknowledgments differ:\n%+v\n%+v", name, fullAcks, markedAcks)
		}
		if len(full) != len(marked) {
			t.Fatalf("%s: %d sets, %d marked", name, len(full), len(marked))
		}
		for i, m := range marked {
			f := *full[i]
			read := m.Payment != nil || m.Claims != nil
			if clean[f.ContentHash] == read {
				t.Errorf("%s set %d: clean %v, its document read %v", name, i, clean[f.ContentHash], read)
			}
			if m.Status != f.Status || m.Reason != f.Reason || !reflect.DeepEqual(m.Errors, f.Errors) ||
				!reflect.DeepEqual(m.Problems, f.Problems) || len(m.Effects) != 0 {
				t.Errorf("%s set %d differs:\n%+v\n%+v", name, i, &f, m)
			}
		}
	}
	for _, k := range []string{"clean", "rejected", "problems", "unbalanced"} {
		if kinds[k] == 0 {
			t.Errorf("no fixture has a %s set: %v", k, kinds)
		}
	}
}

// TestCleanClaimedSetsOfAnotherFormAreRead: the content hash covers a
// set's normal form, so a set sent again in another form (a trailing ':'
// after the date before every service line: "20261101:" is no date) has
// the content hash of the clean original, but reads otherwise. Only a
// Normal set is taken for its clean original (ClaimedClean); the variant
// is read, and acknowledged as reading it in full acknowledges it.
func TestCleanClaimedSetsOfAnotherFormAreRead(t *testing.T) {
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 3, ClaimsPerSet: 2}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	normal := buf.Bytes()
	variant := bytes.ReplaceAll(normal, []byte("~SVC"), []byte(":~SVC"))
	originals, _ := processMarked(t, normal, nil)
	clean := map[string]bool{}
	for _, s := range originals {
		if !s.Clean() {
			t.Fatalf("generated set %s not clean", s.Key)
		}
		clean[s.ContentHash] = true
	}
	read, readAcks := processMarked(t, variant, nil)
	marked, markedAcks := processMarked(t, variant, clean)
	for i, s := range marked {
		if s.ContentHash != originals[i].ContentHash || s.Normal || s.Payment == nil || len(s.Problems) == 0 ||
			!reflect.DeepEqual(s.Problems, read[i].Problems) {
			t.Errorf("variant set %d: hash %s (original %s), normal %v, read %v, %d problems",
				i, s.ContentHash, originals[i].ContentHash, s.Normal, s.Payment != nil, len(s.Problems))
		}
	}
	if !reflect.DeepEqual(readAcks, markedAcks) {
		t.Errorf("the variant's acknowledgments differ when its originals are clean:\n%+v\n%+v", readAcks, markedAcks)
	}
}

// processMarked processes data as an ingest does whose claim lookup found
// every set claimed, the sets of the content hashes in clean by clean
// sets (nil: no lookup); a set is taken for its clean original as the
// ingest takes it (inbox's claims.ask): when Normal. It returns every set
// and acknowledgment.
func processMarked(t *testing.T, data []byte, clean map[string]bool) ([]*Set, []Effect) {
	t.Helper()
	cfg := Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 900}, Ack: ack.Options{Now: fixedNow}}
	if clean != nil {
		cfg.Claims = func(context.Context, []string) (func(*envelope.Set) Known, error) {
			return func(s *envelope.Set) Known {
				if clean[s.HashHex()] && s.Normal {
					return ClaimedClean
				}
				return Claimed
			}, nil
		}
	}
	var sets []*Set
	var acks []Effect
	if _, err := File(context.Background(), bytes.NewReader(data), cfg, func(it Item) error {
		if it.Set != nil {
			set := *it.Set
			sets = append(sets, &set)
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
