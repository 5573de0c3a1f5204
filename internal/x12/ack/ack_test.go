package ack

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/envelope"
)

func TestMemoryControlNumbersUniqueAndIncreasing(t *testing.T) {
	cn := &MemoryControlNumbers{Start: 41}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for i := 0; i < 200; i++ {
				n, err := cn.Next(context.Background(), "ZZ:US")
				if err != nil {
					t.Error(err)
					return
				}
				if n <= last {
					t.Errorf("%d after %d", n, last)
				}
				last = n
				mu.Lock()
				if seen[n] {
					t.Errorf("%d handed out twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 1600 || !seen[41] || !seen[1640] {
		t.Errorf("%d numbers, 41..1640 expected", len(seen))
	}
	if n, _ := cn.Next(context.Background(), "ZZ:OTHER"); n != 41 {
		t.Errorf("another sender starts at %d", n)
	}
}

func TestTA1ForUnreadableFile(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC) }
	if _, err := BuildTA1Unreadable(context.Background(), Party{}, Party{}, &MemoryControlNumbers{}, Options{}); err == nil {
		t.Error("built a TA1 without ids")
	}
	x, err := BuildTA1Unreadable(context.Background(), Party{Qualifier: "ZZ", ID: "RIVERSIDE"},
		Party{Qualifier: "ZZ", ID: "ACMEHP"}, &MemoryControlNumbers{Start: 7}, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	f, err := envelope.Parse(strings.NewReader(string(x)), envelope.Options{})
	if err != nil || !f.Valid() {
		t.Fatalf("TA1 not valid X12: %v %v\n%s", err, f.AllErrors(), x)
	}
	ix := f.Interchanges[0]
	if len(ix.TA1) != 1 || ix.TA1[0].AckCode != "R" || ix.TA1[0].NoteCode != "022" || ix.ControlNumber != "000000007" ||
		ix.SenderID != "RIVERSIDE" || ix.ReceiverID != "ACMEHP" || ix.Date != "261130" {
		t.Errorf("TA1 interchange %+v", ix)
	}
}

// TestTA1RejectsInterchangeDateAndTime: an interchange whose ISA09 and
// ISA10 are not a real date and time, asking for a TA1, gets TA104 R with
// TA105 014 (the first of its errors); a duplicate ISA13 gets 025.
func TestTA1RejectsInterchangeDateAndTime(t *testing.T) {
	for _, c := range []struct {
		isa09, isa10, isa13b, note string
	}{
		{"260230", "0930", "000000302", "014"},
		{"261130", "2460", "000000302", "015"},
		{"261130", "0930", "000000301", "025"},
	} {
		x := "ISA*00*          *00*          *ZZ*ACMEHP         *ZZ*RIVERSIDE      *261130*0930*^*00501*000000301*1*P*:~IEA*0*000000301~" +
			"ISA*00*          *00*          *ZZ*ACMEHP         *ZZ*RIVERSIDE      *" + c.isa09 + "*" + c.isa10 + "*^*00501*" + c.isa13b + "*1*P*:~IEA*0*" + c.isa13b + "~"
		f, err := envelope.Parse(strings.NewReader(x), envelope.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ix := f.Interchanges[1]
		if !WantsTA1(ix, false) || VerdictTA1(ix) != "R"+c.note {
			t.Errorf("%+v: verdict %s, errors %v", c, VerdictTA1(ix), ix.Errors)
			continue
		}
		ta1, err := BuildTA1(context.Background(), ix, &MemoryControlNumbers{Start: 5}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		back, err := envelope.Parse(strings.NewReader(string(ta1)), envelope.Options{})
		if err != nil || len(back.Interchanges) != 1 || len(back.Interchanges[0].TA1) != 1 {
			t.Fatalf("TA1 %q: %v", ta1, err)
		}
		if got := back.Interchanges[0].TA1[0]; got.AckCode != "R" || got.NoteCode != c.note {
			t.Errorf("%+v: TA1 %+v", c, got)
		}
	}
}
