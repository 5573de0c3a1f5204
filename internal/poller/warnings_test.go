package poller_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestX12WarningsAreCountedByCode: an ingested file's envelope warnings
// are counted in ediwatch_x12_warnings_total by code, at every level (a
// set's padded ST02 and SE02 included), and a canonical file counts none.
func TestX12WarningsAreCountedByCode(t *testing.T) {
	dir := t.TempDir()
	// Terminated, or a young file's open last interchange is left for a
	// later poll.
	put(t, dir, "lenient.x12", append(storetest.Fixture(t, "diag/warnings_each_level.x12"), '~'))
	put(t, dir, "canonical.x12", storetest.Fixture(t, "835_canonical.x12"))
	h := newHarness(t, local.Source{}, []string{dir}, nil)
	h.poll(t)
	if st := h.poll(t); st.Ingested != 2 {
		t.Fatalf("poll: %+v", st)
	}
	for code, want := range map[string]float64{"utf8_bom": 1, "isa_field_width": 1, "iea02_leading_zeros": 1,
		"ge02_leading_zeros": 1, "st_se_padding": 2, "line_breaks": 1} {
		if got := testutil.ToFloat64(h.m.X12Warnings.WithLabelValues(code)); got != want {
			t.Errorf("%s = %v, want %v", code, got, want)
		}
	}
	if n := testutil.CollectAndCount(h.m.X12Warnings); n != 9 {
		t.Errorf("%d warning codes counted, want the fixture's 9", n)
	}
}
