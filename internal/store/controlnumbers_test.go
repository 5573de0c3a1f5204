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
