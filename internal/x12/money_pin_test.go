package x12

import (
	"encoding/json"
	"testing"
)

// TestMoneyOutputsArePinned pins what String and MarshalJSON print for the
// amounts X12 carries, as the decimal implementation printed them before
// the fast 64-bit path: at least two decimals up to scale 2, and above it
// the exact value with trailing zeros trimmed (so "1.500" prints "1.5" and
// "0.000" prints "0"). Effect hashes are taken over these bytes, so they
// must never change.
func TestMoneyOutputsArePinned(t *testing.T) {
	for _, tc := range []struct{ in, out, neg string }{
		{"150", "150.00", "-150.00"},
		{"150.00", "150.00", "-150.00"},
		{"-0.50", "-0.50", "0.50"},
		{"1.005", "1.005", "-1.005"},
		{"-0", "0.00", "0.00"},
		{"0", "0.00", "0.00"},
		{"0.000", "0", "0"},
		{"-0.000", "0", "0"},
		{"1.500", "1.5", "-1.5"},
		{"100.000", "100", "-100"},
		{"-100.000", "-100", "100"},
		{"1.", "1.00", "-1.00"},
		{"-1.", "-1.00", "1.00"},
		{".5", "0.50", "-0.50"},
		{"-.5", "-0.50", "0.50"},
		{"007", "7.00", "-7.00"},
		{"-007.10", "-7.10", "7.10"},
		{"0.", "0.00", "0.00"},
		{"00.00", "0.00", "0.00"},
		{"-0.0", "0.00", "0.00"},
		{"5.0", "5.00", "-5.00"},
		{"1.10", "1.10", "-1.10"},
		{"0.001", "0.001", "-0.001"},
		{"-0.0010", "-0.001", "0.001"},
		{"12.3456", "12.3456", "-12.3456"},
		{"999999999999999999", "999999999999999999.00", "-999999999999999999.00"},
		{"-999999999999999999", "-999999999999999999.00", "999999999999999999.00"},
		{"0.99999999999999999", "0.99999999999999999", "-0.99999999999999999"},
		{".000000000000000001", "0.000000000000000001", "-0.000000000000000001"},
		{"9999999999999999.99", "9999999999999999.99", "-9999999999999999.99"},
	} {
		m, err := ParseMoney(tc.in)
		if err != nil {
			t.Errorf("ParseMoney(%q): %v", tc.in, err)
			continue
		}
		if got := m.String(); got != tc.out {
			t.Errorf("ParseMoney(%q).String() = %q, want %q", tc.in, got, tc.out)
		}
		if b, err := json.Marshal(m); err != nil || string(b) != `"`+tc.out+`"` {
			t.Errorf("json.Marshal(%q) = %s, %v", tc.in, b, err)
		}
		if got := m.Neg().String(); got != tc.neg {
			t.Errorf("ParseMoney(%q).Neg().String() = %q, want %q", tc.in, got, tc.neg)
		}
	}
}

func TestMoneyArithmeticOutputsArePinned(t *testing.T) {
	for _, tc := range []struct {
		a, op, b, out string
	}{
		{"1.005", "+", "0.995", "2"},
		{"1.5", "-", "1.50", "0.00"},
		{"0.125", "-", "0.125", "0"},
		{"150", "+", "0.5", "150.50"},
		{"0.10", "+", "0.2", "0.30"},
		{"-20", "-", "0.001", "-20.001"},
		{"999999999999999999", "+", "999999999999999999", "1999999999999999998.00"},
		{"-999999999999999999", "-", "999999999999999999", "-1999999999999999998.00"},
		{".000000000000000001", "+", "999999999999999999", "999999999999999999.000000000000000001"},
		{"99999999999999999.9", "+", "0.01", "99999999999999999.91"},
	} {
		a, b := MustMoney(tc.a), MustMoney(tc.b)
		var got Money
		if tc.op == "+" {
			got = a.Add(b)
		} else {
			got = a.Sub(b)
		}
		if got.String() != tc.out {
			t.Errorf("%s %s %s = %q, want %q", tc.a, tc.op, tc.b, got.String(), tc.out)
		}
	}
	if got := (Money{}).String(); got != "0.00" {
		t.Errorf("zero Money prints %q", got)
	}
	if got := Sum().String(); got != "0.00" {
		t.Errorf("empty Sum prints %q", got)
	}
	if got := Sum(MustMoney("1.1"), MustMoney("2.22"), MustMoney("-0.002")).String(); got != "3.318" {
		t.Errorf("Sum prints %q", got)
	}
}

func TestParseMoneyErrorsArePinned(t *testing.T) {
	for in, msg := range map[string]string{
		"":                     "empty amount",
		"-":                    "amount must have 1 to 18 digits",
		".":                    "amount must have 1 to 18 digits",
		"-.":                   "amount must have 1 to 18 digits",
		"0000000000000000001":  "amount must have 1 to 18 digits",
		"0.999999999999999999": "amount must have 1 to 18 digits",
		"1.2.3":                "invalid character '.' in amount",
		"1e5":                  "invalid character 'e' in amount",
		"+1":                   "invalid character '+' in amount",
		" 1":                   "invalid character ' ' in amount",
		"--1":                  "invalid character '-' in amount",
		"1-":                   "invalid character '-' in amount",
		"30,00":                "invalid character ',' in amount",
	} {
		_, err := ParseMoney(in)
		if err == nil || err.Error() != msg {
			t.Errorf("ParseMoney(%q) error %v, want %q", in, err, msg)
		}
	}
}
