// Package backoff computes the waits of ediwatch's retry loops: capped
// exponential backoff, with or without full jitter, and random spreads.
package backoff

import (
	"crypto/rand"
	"math/big"
	"time"
)

// Capped returns base·2^(attempts-1), capped at limit (an attempts count
// below 1 counts as 1; an overflow gives limit).
func Capped(base, limit time.Duration, attempts int) time.Duration {
	d := base << min(max(attempts-1, 0), 30)
	if d <= 0 || d > limit {
		d = limit
	}
	return d
}

// Full returns Capped with full jitter: a random duration between 0 and
// Capped(base, limit, attempts).
func Full(base, limit time.Duration, attempts int) time.Duration {
	return Between(0, Capped(base, limit, attempts))
}

// Between returns a random duration between lo and hi, both included
// (lo when hi is not above it).
func Between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(hi-lo)+1))
	if err != nil {
		return hi
	}
	return lo + time.Duration(n.Int64())
}
