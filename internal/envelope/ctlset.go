package envelope

import (
	"slices"
	"sort"
)

// ctlSet is a set of control numbers (ST02 within a group, GS06 within an
// interchange), kept for duplicate detection. Senders number sets and
// groups in runs of consecutive numbers, so numeric values are kept as
// runs: a group of 300,000 sets numbered in order costs one run, not
// 300,000 map entries, and the Reader's memory stays bounded whatever the
// size of the group. Values out of order beyond a few thousand runs, and
// values that are not numbers, go to maps.
type ctlSet struct {
	runs     []ctlRun            // sorted by digits then value; disjoint, never adjacent
	loose    map[uint64]struct{} // numbers that did not fit the runs: value | digits<<60
	nonDigit map[string]struct{}
}

// ctlRun holds the numbers lo..hi written with digits digits.
type ctlRun struct {
	digits int
	lo, hi uint64
}

const (
	// maxRunDigits keeps values below 10^18 < 2^60, so that the digit
	// count fits above them in a loose key.
	maxRunDigits = 18
	maxRuns      = 4096
)

// add adds v and reports whether it was there already. Values are equal
// when their strings are: "0001" and "001" differ.
func (c *ctlSet) add(v string) (dup bool) {
	n, ok := digitsValue(v)
	if !ok {
		if c.nonDigit == nil {
			c.nonDigit = make(map[string]struct{}, 1)
		}
		_, dup = c.nonDigit[v]
		c.nonDigit[v] = struct{}{}
		return dup
	}
	key := n | uint64(len(v))<<60
	if _, dup := c.loose[key]; dup {
		return true
	}
	d, runs := len(v), c.runs
	i := sort.Search(len(runs), func(i int) bool {
		return runs[i].digits > d || runs[i].digits == d && runs[i].hi >= n
	})
	if i < len(runs) && runs[i].digits == d && runs[i].lo <= n {
		return true
	}
	joinPrev := i > 0 && runs[i-1].digits == d && runs[i-1].hi+1 == n
	joinNext := i < len(runs) && runs[i].digits == d && runs[i].lo == n+1
	switch {
	case joinPrev && joinNext:
		runs[i-1].hi = runs[i].hi
		runs = slices.Delete(runs, i, i+1)
	case joinPrev:
		runs[i-1].hi = n
	case joinNext:
		runs[i].lo = n
	case len(runs) < maxRuns:
		runs = slices.Insert(runs, i, ctlRun{digits: d, lo: n, hi: n})
	default:
		if c.loose == nil {
			c.loose = make(map[uint64]struct{})
		}
		c.loose[key] = struct{}{}
	}
	c.runs = runs
	return false
}

// digitsValue returns the value of v when it is 1 to maxRunDigits decimal
// digits.
func digitsValue(v string) (uint64, bool) {
	if len(v) == 0 || len(v) > maxRunDigits {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
