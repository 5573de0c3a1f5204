package envelope

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestCtlSetIsASetOfStrings: the run-compressed control number set agrees
// with a map of strings on runs, reversed and shuffled numbers, leading
// zeros, values too long for a run, non-numbers, and more scattered
// numbers than the runs hold.
func TestCtlSetIsASetOfStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var seqs [][]string
	var up, down, shuffled, mixed []string
	for i := 1; i <= 5000; i++ {
		up = append(up, fmt.Sprintf("%04d", i))
		down = append(down, fmt.Sprintf("%04d", 5001-i))
	}
	for i := 0; i < 20000; i++ {
		shuffled = append(shuffled, strconv.Itoa(rng.IntN(30000)))
	}
	for i := 0; i < 3000; i++ {
		n := rng.IntN(50)
		mixed = append(mixed, strconv.Itoa(n), fmt.Sprintf("%03d", n), fmt.Sprintf("%019d", n),
			"A"+strconv.Itoa(n), "", "999999999999999999", "1000000000000000000")
	}
	seqs = append(seqs, up, down, shuffled, mixed, append(append([]string{}, up...), up...))
	for k, seq := range seqs {
		var c ctlSet
		ref := map[string]bool{}
		for i, v := range seq {
			if got, want := c.add(v), ref[v]; got != want {
				t.Fatalf("sequence %d, value %d %q: dup=%v, want %v", k, i, v, got, want)
			}
			ref[v] = true
		}
		if k == 0 && len(c.runs) != 1 {
			t.Errorf("numbers in order take %d runs, want 1", len(c.runs))
		}
	}
}
