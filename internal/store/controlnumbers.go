package store

import (
	"context"
	"fmt"
	"sync"
)

// ControlBlockSize is how many outbound control numbers a process reserves
// at once: acknowledgments take their numbers outside the ingest
// transaction, and one short commit per block (an fsync under SQLite's
// synchronous=FULL) costs far less than one per acknowledgment.
const ControlBlockSize = 100

// maxControlNumber is the largest nine-digit ISA13.
const maxControlNumber = 999_999_999

// ControlNumbers hands out a driver's control numbers from blocks it
// reserves through Reserve: unique across every process sharing the
// database, increasing within each; a restart leaves a gap, which X12
// allows. It is safe for concurrent use.
type ControlNumbers struct {
	// Reserve advances sender's sequence by n in one statement and returns
	// its new end: the block is [end-n, end).
	Reserve func(ctx context.Context, sender string, n int64) (end int64, err error)

	mu     sync.Mutex
	blocks map[string]*controlBlock
}

type controlBlock struct{ next, end int64 }

// Next returns sender's next control number.
func (c *ControlNumbers) Next(ctx context.Context, sender string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.blocks[sender]
	if b == nil || b.next >= b.end {
		end, err := c.Reserve(ctx, sender, ControlBlockSize)
		if err != nil {
			return 0, fmt.Errorf("control number: %w", err)
		}
		if c.blocks == nil {
			c.blocks = map[string]*controlBlock{}
		}
		b = &controlBlock{next: end - ControlBlockSize, end: end}
		c.blocks[sender] = b
	}
	if b.next > maxControlNumber {
		return 0, fmt.Errorf("control numbers for %s exhausted", sender)
	}
	n := b.next
	b.next++
	return n, nil
}

// TryNext returns sender's next control number from the block this
// process holds, without reserving one and without waiting: false when
// there is none left, or when Next holds the blocks while it reserves (its
// reservation may wait for the very write lock TryNext's caller holds).
func (c *ControlNumbers) TryNext(sender string) (int64, bool) {
	if !c.mu.TryLock() {
		return 0, false
	}
	defer c.mu.Unlock()
	b := c.blocks[sender]
	if b == nil || b.next >= b.end || b.next > maxControlNumber {
		return 0, false
	}
	n := b.next
	b.next++
	return n, true
}

// TryTake is TryNext for up to n numbers: the block [first, end) of the
// block this process holds, false when none is left or Next holds the
// blocks.
func (c *ControlNumbers) TryTake(sender string, n int64) (first, end int64, ok bool) {
	if !c.mu.TryLock() {
		return 0, 0, false
	}
	defer c.mu.Unlock()
	b := c.blocks[sender]
	if b == nil || b.next >= b.end || b.next > maxControlNumber {
		return 0, 0, false
	}
	first, end = b.next, min(b.end, b.next+n, maxControlNumber+1)
	b.next = end
	return first, end, true
}

// Keep takes [next, end), numbers of sender this process reserved and
// committed elsewhere (an ingestion's transaction) and left unused, as its
// block, unless it still holds numbers of sender or has handed out one
// past next (a block reserved since): the kept ones are then a gap, so
// that every number is greater than those before it.
func (c *ControlNumbers) Keep(sender string, next, end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.blocks[sender]; next >= end || (b != nil && (b.next < b.end || b.end > next)) {
		return
	}
	if c.blocks == nil {
		c.blocks = map[string]*controlBlock{}
	}
	c.blocks[sender] = &controlBlock{next: next, end: end}
}

// InRange reports an error for a control number past the nine digits of
// ISA13.
func InRange(sender string, n int64) error {
	if n > maxControlNumber {
		return fmt.Errorf("control numbers for %s exhausted", sender)
	}
	return nil
}
