package store

import (
	"context"
	"errors"
	"testing"
)

// TestControlNumbersComeFromBlocks: numbers are handed out from reserved
// blocks in order, one reservation per ControlBlockSize numbers; a failed
// reservation is an error, and the nine-digit space ends in an error.
func TestControlNumbersComeFromBlocks(t *testing.T) {
	ctx := context.Background()
	var seq, reserves int64
	c := ControlNumbers{Reserve: func(_ context.Context, _ string, n int64) (int64, error) {
		reserves++
		seq += n
		return seq + 1, nil // the sequence starts at 1
	}}
	for want := int64(1); want <= 2*ControlBlockSize+1; want++ {
		got, err := c.Next(ctx, "ZZ:US")
		if err != nil || got != want {
			t.Fatalf("Next = %d, %v; want %d", got, err, want)
		}
	}
	if reserves != 3 {
		t.Errorf("%d reservations for %d numbers, want 3", reserves, 2*ControlBlockSize+1)
	}
	failing := ControlNumbers{Reserve: func(context.Context, string, int64) (int64, error) {
		return 0, errors.New("database down")
	}}
	if _, err := failing.Next(ctx, "ZZ:US"); err == nil {
		t.Error("a failed reservation gave a number")
	}
	last := ControlNumbers{Reserve: func(context.Context, string, int64) (int64, error) {
		return maxControlNumber + 1 + ControlBlockSize, nil
	}}
	if _, err := last.Next(ctx, "ZZ:US"); err == nil {
		t.Error("a number past 999999999 was handed out")
	}
}

// TestKeptControlNumbersComeNextOnlyWhenHigher: numbers an ingestion
// reserved and left unused are handed out next once the process's block
// is used up, never while it still holds numbers, and never after a
// higher block was handed out (each number is greater than those before).
func TestKeptControlNumbersComeNextOnlyWhenHigher(t *testing.T) {
	ctx := context.Background()
	var seq int64
	c := ControlNumbers{Reserve: func(_ context.Context, _ string, n int64) (int64, error) {
		seq += n
		return seq + 1, nil
	}}
	const us = "ZZ:US"
	next := func() int64 {
		t.Helper()
		n, err := c.Next(ctx, us)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := next(); n != 1 {
		t.Fatalf("first number %d", n)
	}
	// [101, 111) reserved by an ingestion while the block [1, 101) has
	// numbers left: a gap.
	seq += 10
	c.Keep(us, 101, 111)
	if n := next(); n != 2 {
		t.Errorf("after a kept block while numbers were left: %d, want 2", n)
	}
	for range ControlBlockSize - 2 {
		next()
	}
	// The block is used up; [111, 121) reserved by an ingestion comes
	// next, from its first number on.
	seq += 10
	c.Keep(us, 111, 121)
	if n := next(); n != 111 {
		t.Errorf("after a kept block: %d, want 111", n)
	}
	if first, end, ok := c.TryTake(us, 100); !ok || first != 112 || end != 121 {
		t.Errorf("TryTake(100) = [%d, %d) %v, want [112, 121)", first, end, ok)
	}
	// Used up again, then a block reserved and handed out past numbers
	// kept afterwards: those are a gap.
	if n := next(); n != 121 {
		t.Fatalf("next block starts at %d, want 121", n)
	}
	for range ControlBlockSize - 1 {
		next()
	}
	c.Keep(us, 150, 160)
	if n := next(); n != 221 {
		t.Errorf("after keeping numbers lower than those handed out: %d, want 221", n)
	}
}
