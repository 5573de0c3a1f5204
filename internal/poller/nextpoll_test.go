package poller

import (
	"testing"
	"time"
)

// TestPollsStartEveryInterval: the next poll starts an interval (±10%)
// after the last one began, at once when the last overran the interval,
// and a tenth of the interval (at most a second) later when it left files
// for the next (max_files_per_poll).
func TestPollsStartEveryInterval(t *testing.T) {
	for range 100 {
		if d := nextPoll(10*time.Second, 2*time.Second, false); d < 7*time.Second || d > 9*time.Second {
			t.Fatalf("after a 2 s poll of a 10 s interval: next in %v, want 7–9 s", d)
		}
	}
	if d := nextPoll(time.Second, 3*time.Second, false); d != 0 {
		t.Errorf("after a poll that overran its interval: next in %v, want at once", d)
	}
	if d := nextPoll(time.Hour, time.Millisecond, true); d != time.Second {
		t.Errorf("after a poll that deferred files, interval 1 h: next in %v, want 1 s", d)
	}
	if d := nextPoll(time.Second, 3*time.Second, true); d != 100*time.Millisecond {
		t.Errorf("after a poll that deferred files, interval 1 s: next in %v, want 100 ms", d)
	}
}
