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
