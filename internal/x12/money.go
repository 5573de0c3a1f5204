package x12

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/shopspring/decimal"
)

// Money is an exact decimal amount. It is never a float: it is parsed
// from the X12 text, summed exactly, and written to JSON as a string that
// keeps at least two decimal places and never loses precision.
//
// Every amount X12 carries (at most 18 digits) is held as a scaled 64-bit
// integer, c / 10^s, and sums, differences and comparisons of such amounts
// are integer arithmetic. A result that would not fit 64 bits never wraps:
// it is computed exactly by shopspring/decimal instead and kept in that
// form, and a later result that fits again returns to the integer form.
// Both forms print, compare and encode alike, so the choice is invisible.
//
// The zero value is zero (printed "0.00"). A Money is immutable and safe
// to share between goroutines.
type Money struct {
	c   int64            // coefficient: the value is c / 10^s
	s   uint8            // scale, 0 to maxScale
	big *decimal.Decimal // the value when it does not fit c and s; c and s are then zero
}

// maxScale is the largest scale of the integer form: 10^18 fits an int64,
// and ParseMoney accepts at most 18 digits.
const maxScale = 18

var pow10 = [maxScale + 1]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// ParseMoney parses an X12 R (decimal) value: optional sign, digits, an
// optional decimal point. No exponent, no thousands separators. It does
// not allocate unless s is invalid.
func ParseMoney(s string) (Money, error) {
	if s == "" {
		return Money{}, fmt.Errorf("empty amount")
	}
	var c uint64
	digits, scale, dot := 0, 0, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= '0' && ch <= '9':
			digits++
			if digits <= maxScale {
				c = c*10 + uint64(ch-'0')
			}
			if dot {
				scale++
			}
		case ch == '.' && !dot:
			dot = true
		case ch == '-' && i == 0:
		default:
			return Money{}, fmt.Errorf("invalid character %q in amount", ch)
		}
	}
	if digits == 0 || digits > maxScale {
		return Money{}, fmt.Errorf("amount must have 1 to 18 digits")
	}
	v := int64(c) // at most 18 digits: below 2^63
	if s[0] == '-' {
		v = -v
	}
	return Money{c: v, s: uint8(scale)}, nil
}

// MustMoney parses s or panics; for tests and constants.
func MustMoney(s string) Money {
	m, err := ParseMoney(s)
	if err != nil {
		panic(err)
	}
	return m
}

// Decimal returns the amount as a shopspring decimal with the same
// coefficient and exponent (the exact slow form).
func (m Money) Decimal() decimal.Decimal {
	if m.big != nil {
		return *m.big
	}
	return decimal.New(m.c, -int32(m.s))
}

// fromDecimal returns d in the integer form when it fits, else as is.
func fromDecimal(d decimal.Decimal) Money {
	if e := d.Exponent(); e <= 0 && e >= -maxScale {
		if c := d.Coefficient(); c.IsInt64() {
			return Money{c: c.Int64(), s: uint8(-e)}
		}
	}
	return Money{big: &d}
}

// rescale returns c * 10^k, or false when that overflows an int64.
func rescale(c int64, k uint8) (int64, bool) {
	if k == 0 {
		return c, true
	}
	if k > maxScale {
		return 0, false
	}
	p := pow10[k]
	if c > math.MaxInt64/p || c < math.MinInt64/p {
		return 0, false
	}
	return c * p, true
}

// align returns both coefficients at the larger scale, or false when one
// does not fit.
func align(a, b Money) (x, y int64, s uint8, ok bool) {
	s = max(a.s, b.s)
	if x, ok = rescale(a.c, s-a.s); !ok {
		return
	}
	y, ok = rescale(b.c, s-b.s)
	return
}

// Add returns m + o. The scale of the result is the larger of the two.
func (m Money) Add(o Money) Money {
	if m.big == nil && o.big == nil {
		if x, y, s, ok := align(m, o); ok {
			if r := x + y; (y >= 0) == (r >= x) { // no overflow
				return Money{c: r, s: s}
			}
		}
	}
	return fromDecimal(m.Decimal().Add(o.Decimal()))
}

// Sub returns m - o. The scale of the result is the larger of the two.
func (m Money) Sub(o Money) Money {
	if m.big == nil && o.big == nil {
		if x, y, s, ok := align(m, o); ok {
			if r := x - y; (y >= 0) == (r <= x) { // no overflow
				return Money{c: r, s: s}
			}
		}
	}
	return fromDecimal(m.Decimal().Sub(o.Decimal()))
}

// Neg returns -m, at the same scale.
func (m Money) Neg() Money {
	if m.big == nil && m.c != math.MinInt64 {
		return Money{c: -m.c, s: m.s}
	}
	return fromDecimal(m.Decimal().Neg())
}

// Cmp returns -1, 0 or +1 as m is less than, equal to or greater than o.
func (m Money) Cmp(o Money) int {
	if m.big == nil && o.big == nil {
		if x, y, _, ok := align(m, o); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	return m.Decimal().Cmp(o.Decimal())
}

// Equal reports whether m and o are the same amount, whatever their scale.
func (m Money) Equal(o Money) bool { return m.Cmp(o) == 0 }

// IsZero reports whether m is zero.
func (m Money) IsZero() bool { return m.big == nil && m.c == 0 } // zero always fits

// String returns the amount with at least two decimal places.
func (m Money) String() string {
	var buf [48]byte
	return string(m.Append(buf[:0]))
}

// Append appends the amount as String writes it to dst. Up to two decimal
// places it writes exactly two ("150.00", "0.50"); beyond that it writes
// the exact value with trailing zeros trimmed ("1.005", "1.500" as "1.5",
// "0.000" as "0"), as the decimal form always has.
func (m Money) Append(dst []byte) []byte {
	if m.big != nil {
		if m.big.Exponent() >= -2 {
			return append(dst, m.big.StringFixed(2)...)
		}
		return append(dst, m.big.String()...)
	}
	var u uint64
	if m.c < 0 {
		u = uint64(^m.c) + 1 // |MinInt64| too
		dst = append(dst, '-')
	} else {
		u = uint64(m.c)
	}
	// The digits, right to left, with leading zeros up to one before the
	// point: at most 20 bytes.
	s := int(m.s)
	var buf [24]byte
	i := len(buf)
	for k := 0; u > 0 || k <= s; k++ {
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
	}
	digits := buf[i:]
	intPart, frac := digits[:len(digits)-s], digits[len(digits)-s:]
	dst = append(dst, intPart...)
	if s <= 2 {
		dst = append(dst, '.')
		dst = append(dst, frac...)
		for k := s; k < 2; k++ {
			dst = append(dst, '0')
		}
		return dst
	}
	if frac = trimZeros(frac); len(frac) > 0 {
		dst = append(dst, '.')
		dst = append(dst, frac...)
	}
	return dst
}

func trimZeros(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return b
}

// AppendJSON appends the amount as a JSON string, e.g. "150.00", exactly
// as MarshalJSON writes it.
func (m Money) AppendJSON(dst []byte) []byte {
	// Digits, a sign and a point never need JSON escaping.
	dst = append(dst, '"')
	dst = m.Append(dst)
	return append(dst, '"')
}

// MarshalJSON writes the amount as a JSON string, e.g. "150.00".
func (m Money) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(make([]byte, 0, 24)), nil
}

// UnmarshalJSON reads an amount written by MarshalJSON.
func (m *Money) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseMoney(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Sum adds amounts.
func Sum(ms ...Money) Money {
	var t Money
	for _, m := range ms {
		t = t.Add(m)
	}
	return t
}
