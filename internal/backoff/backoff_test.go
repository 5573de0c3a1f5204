package backoff

import (
	"testing"
	"time"
)

func TestCappedDoublesPerAttemptUpToTheLimit(t *testing.T) {
	for _, c := range []struct {
		attempts int
		want     time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {7, time.Minute}, {1000, time.Minute}} {
		if got := Capped(time.Second, time.Minute, c.attempts); got != c.want {
			t.Errorf("Capped(1s, 1m, %d) = %s, want %s", c.attempts, got, c.want)
		}
	}
}

func TestFullJitterStaysWithinTheCappedBackoff(t *testing.T) {
	for range 100 {
		if d := Full(time.Second, time.Minute, 3); d < 0 || d > 4*time.Second {
			t.Fatalf("Full(1s, 1m, 3) = %s, want within [0, 4s]", d)
		}
	}
}

func TestBetweenStaysWithinItsBounds(t *testing.T) {
	for range 100 {
		if d := Between(time.Second, 2*time.Second); d < time.Second || d > 2*time.Second {
			t.Fatalf("Between(1s, 2s) = %s", d)
		}
	}
	if d := Between(time.Second, time.Second); d != time.Second {
		t.Errorf("Between(1s, 1s) = %s, want 1s", d)
	}
}
