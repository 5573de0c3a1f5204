package x12_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// refParse is the exact decimal path ParseMoney took before the 64-bit
// fast path: the same validation, then shopspring's parser.
func refParse(s string) (decimal.Decimal, bool) {
	if s == "" {
		return decimal.Decimal{}, false
	}
	digits, dot := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		case c == '-' && i == 0:
		default:
			return decimal.Decimal{}, false
		}
	}
	if digits == 0 || digits > 18 {
		return decimal.Decimal{}, false
	}
	d, err := decimal.NewFromString(s)
	return d, err == nil
}

// refString is how the decimal path printed an amount.
func refString(d decimal.Decimal) string {
	if d.Exponent() >= -2 {
		return d.StringFixed(2)
	}
	return d.String()
}

// same reports how m differs from the exact decimal d: its value, its
// scale (which decides how it prints) or its printed and JSON forms.
func same(m x12.Money, d decimal.Decimal) error {
	md := m.Decimal()
	if md.Cmp(d) != 0 || md.Exponent() != d.Exponent() {
		return fmt.Errorf("value %s (exp %d), exact %s (exp %d)", md, md.Exponent(), d, d.Exponent())
	}
	if m.String() != refString(d) {
		return fmt.Errorf("prints %q, exact path %q", m.String(), refString(d))
	}
	b, err := m.MarshalJSON()
	if err != nil || string(b) != `"`+refString(d)+`"` {
		return fmt.Errorf("JSON %s (%v), exact path %q", b, err, refString(d))
	}
	if m.IsZero() != d.IsZero() {
		return fmt.Errorf("IsZero %v, exact path %v", m.IsZero(), d.IsZero())
	}
	return nil
}

// agree checks every operation on a and b against the exact decimal path.
func agree(t *testing.T, a, b string) {
	t.Helper()
	ma, errA := x12.ParseMoney(a)
	da, okA := refParse(a)
	if (errA == nil) != okA {
		t.Fatalf("ParseMoney(%q) error %v, exact path ok=%v", a, errA, okA)
	}
	mb, errB := x12.ParseMoney(b)
	db, okB := refParse(b)
	if (errB == nil) != okB {
		t.Fatalf("ParseMoney(%q) error %v, exact path ok=%v", b, errB, okB)
	}
	if !okA || !okB {
		return
	}
	for _, c := range []struct {
		op string
		m  x12.Money
		d  decimal.Decimal
	}{
		{"parse " + a, ma, da},
		{"neg " + a, ma.Neg(), da.Neg()},
		{a + " + " + b, ma.Add(mb), da.Add(db)},
		{a + " - " + b, ma.Sub(mb), da.Sub(db)},
		{b + " - " + a, mb.Sub(ma), db.Sub(da)},
		{"sum", x12.Sum(ma, mb, mb.Neg()), da.Add(db).Add(db.Neg())},
	} {
		if err := same(c.m, c.d); err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
	}
	if got, want := ma.Cmp(mb), da.Cmp(db); got != want {
		t.Fatalf("Cmp(%s, %s) = %d, exact path %d", a, b, got, want)
	}
	if got, want := ma.Equal(mb), da.Equal(db); got != want {
		t.Fatalf("Equal(%s, %s) = %v, exact path %v", a, b, got, want)
	}
}

// looksDecimal reports whether v could be an X12 R value.
func looksDecimal(v []byte) bool {
	digit := false
	for i, c := range v {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c == '.' || c == '-' && i == 0:
		default:
			return false
		}
	}
	return digit
}

// TestMoneyAgreesWithDecimalOnCorpus takes every element of every 835 and
// 837 set of the public corpus that looks like a decimal (every amount the
// document parsers read, and more) and checks parsing, printing, JSON,
// sums, differences and comparisons of it and its neighbour against the
// exact decimal path.
func TestMoneyAgreesWithDecimalOnCorpus(t *testing.T) {
	var amounts []string
	err := filepath.WalkDir(testenv.Corpus(t), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rd := envelope.NewReader(bytes.NewReader(data), envelope.Options{KeepSegments: true})
		for {
			k, err := rd.Next()
			if err != nil { // io.EOF, or a file the reader gives up on
				return nil
			}
			if k != envelope.KindSet || (rd.Set().Type != "835" && rd.Set().Type != "837") {
				continue
			}
			for _, s := range rd.Set().Segments() {
				for _, el := range s.Elements()[1:] {
					for _, rep := range bytes.Split(el, []byte{s.Delimiters().Repetition}) {
						for _, v := range s.Components(rep) {
							if v = bytes.Trim(v, " "); looksDecimal(v) {
								amounts = append(amounts, string(v))
							}
						}
					}
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(amounts) < 1000 {
		t.Fatalf("only %d decimal-looking values in the corpus", len(amounts))
	}
	for i, a := range amounts {
		agree(t, a, amounts[(i+1)%len(amounts)])
		agree(t, a, amounts[len(amounts)-1-i])
	}
	t.Logf("%d corpus values", len(amounts))
}

// randomAmount returns an X12 R value, valid or (rarely) not: 1 to 19
// digits, any scale, leading zeros, a bare point at either end, a sign.
func randomAmount(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(2) == 0 {
		b.WriteByte('-')
	}
	n := 1 + r.IntN(18)
	if r.IntN(50) == 0 {
		n = 19 // too many digits
	}
	dot := -1
	if r.IntN(4) != 0 {
		dot = r.IntN(n + 1)
	}
	nines := r.IntN(8) == 0 // the extremes
	for i := 0; i < n; i++ {
		if i == dot {
			b.WriteByte('.')
		}
		switch {
		case nines:
			b.WriteByte('9')
		case r.IntN(6) == 0:
			b.WriteByte('0')
		default:
			b.WriteByte(byte('0' + r.IntN(10)))
		}
	}
	if dot == n {
		b.WriteByte('.')
	}
	return b.String()
}

// TestMoneyAgreesWithDecimalOnRandomAmounts checks pairs of random amounts
// (a fixed seed, so a failure reproduces) against the exact decimal path,
// then long running sums that leave the 64-bit range and come back.
func TestMoneyAgreesWithDecimalOnRandomAmounts(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 835))
	for range 100_000 {
		agree(t, randomAmount(r), randomAmount(r))
	}
	for run := range 200 {
		var m x12.Money
		var d decimal.Decimal
		var added []string
		for range 50 {
			a := randomAmount(r)
			ma, err := x12.ParseMoney(a)
			if err != nil {
				continue
			}
			da, _ := refParse(a)
			m, d = m.Add(ma), d.Add(da)
			added = append(added, a)
			if err := same(m, d); err != nil {
				t.Fatalf("run %d, sum of %v: %v", run, added, err)
			}
		}
		for i := len(added) - 1; i >= 0; i-- { // back down, through the 64-bit range
			ma, da := x12.MustMoney(added[i]), decimal.RequireFromString(added[i])
			m, d = m.Sub(ma), d.Sub(da)
			if err := same(m, d); err != nil {
				t.Fatalf("run %d, taking back %s: %v", run, added[i], err)
			}
		}
		if !m.IsZero() {
			t.Fatalf("run %d: sum minus its parts is %s", run, m)
		}
	}
}

// TestMoneyNeverWraps: sums and differences beyond 64 bits stay exact.
func TestMoneyNeverWraps(t *testing.T) {
	big := x12.MustMoney("999999999999999999")
	tiny := x12.MustMoney(".000000000000000001")
	m := x12.Sum(big, big, big, big, big, big, big, big, big, big, big)
	if m.String() != "10999999999999999989.00" {
		t.Errorf("11 × 999999999999999999 = %s", m)
	}
	if got := big.Add(tiny).String(); got != "999999999999999999.000000000000000001" {
		t.Errorf("big + tiny = %s", got)
	}
	if got := big.Add(tiny).Sub(big); !got.Equal(tiny) || got.String() != "0.000000000000000001" {
		t.Errorf("big + tiny - big = %s", got)
	}
	neg := big.Neg()
	for range 10 {
		neg = neg.Sub(big)
	}
	if neg.Cmp(big) >= 0 || neg.Cmp(m.Neg()) != 0 || !neg.Neg().Equal(m) {
		t.Errorf("-11 × big = %s", neg)
	}
	if m.Cmp(big) <= 0 || big.Cmp(m) >= 0 {
		t.Errorf("%s vs %s", m, big)
	}
}
