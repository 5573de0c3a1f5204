package x12_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ediwatch/ediwatch/internal/x12"
	"github.com/shopspring/decimal"
)

// TestReviewMoneyRandomWalksAgreeWithDecimal: long chains of Add, Sub and
// Neg over extreme amounts (18 digits at every scale, 1e-18, values whose
// sums cross 2^63 and come back, MinInt64 coefficients) agree with the
// exact decimal path at every step: value, scale, printed form, Cmp,
// Equal and IsZero, between the integer and the fallback forms.
func TestReviewMoneyRandomWalksAgreeWithDecimal(t *testing.T) {
	pool := []string{"0", "-0", "-0.00", "0.000", "1", "-1", "0.01", "-0.01", "999999999999999999",
		"-999999999999999999", ".000000000000000001", "-.000000000000000001", "9.22337203685477580",
		"-9.22337203685477580", "4.61168601842738790", "-4.61168601842738790", "92233720368547758.7",
		"-92233720368547758.8", ".999999999999999999", "-.999999999999999999", "100.5", "1.005",
		"-0.50", "12345678901234567.8", "5.", "-.5", "000000000000000001", "-223372036854775817", "-.223372036854775817", "223372036854775817"}
	r := rand.New(rand.NewPCG(6, 3))
	for walk := 0; walk < 20000; walk++ {
		m, d := x12.Money{}, decimal.Decimal{}
		for step := 0; step < 12; step++ {
			s := pool[r.IntN(len(pool))]
			o := x12.MustMoney(s)
			od, ok := refParse(s)
			if !ok {
				t.Fatalf("ref cannot parse %q", s)
			}
			switch r.IntN(5) {
			case 0, 1:
				m, d = m.Add(o), d.Add(od)
			case 2, 3:
				m, d = m.Sub(o), d.Sub(od)
			case 4:
				m, d = m.Neg(), d.Neg()
			}
			if err := same(m, d); err != nil {
				t.Fatalf("walk %d step %d (%q): %v", walk, step, s, err)
			}
			if got, want := m.Cmp(o), d.Cmp(od); got != want {
				t.Fatalf("walk %d step %d: Cmp(%s, %s) = %d, want %d", walk, step, m, o, got, want)
			}
			if got, want := o.Cmp(m), od.Cmp(d); got != want {
				t.Fatalf("walk %d step %d: Cmp(%s, %s) = %d, want %d", walk, step, o, m, got, want)
			}
			if m.Equal(o) != d.Equal(od) {
				t.Fatalf("walk %d step %d: Equal(%s, %s)", walk, step, m, o)
			}
		}
	}
}

// TestReviewMoneyMinInt64Coefficient: a sum whose coefficient is exactly
// -2^63 prints, negates and compares exactly.
func TestReviewMoneyMinInt64Coefficient(t *testing.T) {
	big, rest := x12.MustMoney("-999999999999999999"), x12.MustMoney("-223372036854775817")
	m := x12.Sum(big, big, big, big, big, big, big, big, big, rest)
	d := decimal.RequireFromString("-9223372036854775808")
	if err := same(m, d); err != nil {
		t.Fatal(err)
	}
	if err := same(m.Neg(), d.Neg()); err != nil {
		t.Fatal(err)
	}
	if err := same(m.Sub(x12.MustMoney("1")), d.Sub(decimal.NewFromInt(1))); err != nil {
		t.Fatal(err)
	}
	if m.Cmp(m.Neg()) != -1 || m.Neg().Add(m).String() != "0.00" {
		t.Fatalf("%s vs %s", m, m.Neg())
	}
}
