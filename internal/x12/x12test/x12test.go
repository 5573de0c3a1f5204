// Package x12test holds what the document models' tests share: the
// transaction sets of the public corpus and random values for checking the
// hand-written JSON encoders against encoding/json. Only tests import it.
package x12test

import (
	"bytes"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// Sets returns the segments (copied) of every transaction set of type typ
// in data, in file order.
func Sets(t testing.TB, data []byte, typ string) [][]envelope.Segment {
	t.Helper()
	rd := envelope.NewReader(bytes.NewReader(data), envelope.Options{KeepSegments: true})
	var out [][]envelope.Segment
	for {
		k, err := rd.Next()
		if err != nil { // io.EOF, or a file the reader gives up on
			if err != io.EOF {
				t.Logf("read: %v", err)
			}
			return out
		}
		if k == envelope.KindSet && rd.Set().Type == typ {
			var segs []envelope.Segment
			for _, s := range rd.Set().Segments() {
				segs = append(segs, s.Clone())
			}
			out = append(out, segs)
		}
	}
}

// CorpusSets returns every transaction set of type typ in the public
// corpus, by file name relative to the corpus.
func CorpusSets(t testing.TB, typ string) map[string][][]envelope.Segment {
	t.Helper()
	dir := testenv.Corpus(t)
	out := map[string][][]envelope.Segment{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if ss := Sets(t, data, typ); len(ss) > 0 {
			rel, _ := filepath.Rel(dir, path)
			out[rel] = ss
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// awkward are the pieces random strings are made of: everything
// encoding/json escapes or replaces, and plain text.
var awkward = []string{"", "A", "Smith", "99213", " ", "<", ">", "&", `"`, `\`, "/", "\x00", "\x01",
	"\b", "\f", "\n", "\r", "\t", "\x1f", "\x7f", "é", "€", "😀", "\u2028", "\u2029", "\ufffd",
	"\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80", "<script>", "a&b", "\u00a0"}

// String returns a random string of awkward pieces, empty one time in four.
func String(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for n := 1 + r.IntN(4); n > 0; n-- {
		b.WriteString(awkward[r.IntN(len(awkward))])
	}
	return b.String()
}

// Money returns a random amount: any scale up to 18 digits, negative,
// zero, and now and then a sum past 64 bits (the exact slow form).
func Money(r *rand.Rand) x12.Money {
	amount := func() x12.Money {
		var b strings.Builder
		if r.IntN(3) == 0 {
			b.WriteByte('-')
		}
		n := 1 + r.IntN(18)
		dot := r.IntN(n + 1)
		for i := 0; i < n; i++ {
			if i == dot && r.IntN(2) == 0 {
				b.WriteByte('.')
			}
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		return x12.MustMoney(b.String())
	}
	m := amount()
	if r.IntN(10) == 0 {
		for range 3 {
			m = m.Add(amount())
		}
	}
	return m
}

var moneyType = reflect.TypeFor[x12.Money]()

// Fill sets every exported field reachable from the pointer v to random
// values: awkward strings, random money, small numbers, nil, empty and
// filled slices, nil and set pointers.
func Fill(r *rand.Rand, v any) {
	fill(r, reflect.ValueOf(v).Elem(), 0)
}

func fill(r *rand.Rand, v reflect.Value, depth int) {
	if v.Type() == moneyType {
		v.Set(reflect.ValueOf(Money(r)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(String(r))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(r.IntN(5)) - 1)
	case reflect.Pointer:
		if r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		switch k := r.IntN(4); {
		case k == 0 || depth > 4:
			v.SetZero() // nil
		case k == 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0)) // empty, not nil
		default:
			s := reflect.MakeSlice(v.Type(), 1+r.IntN(3), 4)
			for i := 0; i < s.Len(); i++ {
				fill(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	}
}
