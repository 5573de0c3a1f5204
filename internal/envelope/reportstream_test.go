package envelope

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// streamReport writes the Report of data piecewise, as `inspect --json`
// does, with the appenders and ReportErrors.
func streamReport(t *testing.T, data []byte) []byte {
	t.Helper()
	rd := NewReader(bytes.NewReader(data), Options{})
	re := NewReportErrors(rd)
	var ixs, errs []byte
	var keys []string
	ixOpen, gOpen := false, false
	nIX, nG, nS, ixSets := 0, 0, 0, 0
	open := func() {
		if !ixOpen {
			ixOpen, nG, ixSets = true, 0, 0
			if nIX++; nIX > 1 {
				ixs = append(ixs, ',')
			}
			ixs = AppendInterchangeHead(ixs, rd.Interchange())
		}
	}
	openG := func() {
		open()
		if !gOpen {
			gOpen, nS = true, 0
			if nG++; nG > 1 {
				ixs = append(ixs, ',')
			}
			ixs = AppendGroupHead(ixs, rd.Group())
		}
	}
	emit := func(e *ParseError) error {
		if len(errs) > 0 {
			errs = append(errs, ',')
		}
		errs = AppendErrorJSON(errs, e)
		return nil
	}
	valid := true
	for {
		k, err := rd.Next()
		if err == io.EOF {
			re.Finish(emit)
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch k {
		case KindSet:
			openG()
			if nS++; nS > 1 {
				ixs = append(ixs, ',')
			}
			ixSets++
			ixs = append(AppendSetOpen(ixs, rd.Set()), '}')
			keys = append(keys, rd.Set().Key)
		case KindGroupEnd:
			openG()
			gOpen = false
			ixs = AppendGroupTail(ixs, rd.Group())
		case KindInterchangeEnd:
			open()
			ixOpen = false
			valid = valid && rd.Interchange().Valid()
			ixs = AppendInterchangeTail(ixs, rd.Interchange())
			if ixSets == 0 {
				keys = append(keys, rd.Interchange().Key())
			}
		}
		re.Collect(k, emit)
	}
	if !rd.X12() {
		keys = []string{rd.FileKey()}
	}
	if keys == nil {
		keys = []string{}
	}
	out := []byte(`{"interchanges":[`)
	out = append(out, ixs...)
	out = append(out, `],"errors":[`...)
	out = append(out, errs...)
	out = append(out, `],"keys":`...)
	k, _ := json.Marshal(keys)
	out = append(out, k...)
	if ws := rd.FileWarnings(); len(ws) > 0 {
		out = append(out, `,"warnings":`...)
		w, _ := json.Marshal(ws)
		out = append(out, w...)
	}
	v, _ := json.Marshal(map[string]bool{"x12": rd.X12(), "valid": valid && rd.X12() && len(rd.FileErrors()) == 0})
	out = append(out, ',')
	return append(out, v[1:]...)
}

// TestStreamedReportEqualsReport: the Report written piecewise while the
// file is read has the members and values of File.Report, errors in the
// same order, on every fixture and corpus file.
func TestStreamedReportEqualsReport(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.*")
	diag, _ := filepath.Glob("testdata/diag/*.x12")
	files = append(files, diag...)
	corpus, _ := filepath.Glob(filepath.Join(corpusDir(t), "*", "*"))
	files = append(files, corpus...)
	if len(files) < 80 {
		t.Fatalf("%d files", len(files))
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(bytes.NewReader(data), Options{})
		if err != nil {
			t.Fatal(err)
		}
		enc := new(bytes.Buffer)
		e := json.NewEncoder(enc)
		e.SetEscapeHTML(false)
		if err := e.Encode(f.Report()); err != nil {
			t.Fatal(err)
		}
		var want, got any
		json.Unmarshal(enc.Bytes(), &want)
		streamed := streamReport(t, data)
		if err := json.Unmarshal(streamed, &got); err != nil {
			t.Fatalf("%s: streamed report is not JSON: %v\n%s", path, err, streamed)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", path, streamed, enc.Bytes())
		}
	}
}

// TestAppendJSONStringIsEncodingJSON: strings are escaped byte for byte as
// encoding/json escapes them with HTML escaping off, control bytes,
// invalid UTF-8 and U+2028 included.
func TestAppendJSONStringIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "\x00", "\x01", "\b", "\f", "\n", "\r",
		"\t", "\x1f", "\x7f", "\xff", "\xc3", "é", "\u2028", "\u2029", "😀", "\xe2\x80"}
	for i := 0; i < 20000; i++ {
		var s string
		for n := rng.IntN(12); n > 0; n-- {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		e.SetEscapeHTML(false)
		e.Encode(s)
		want := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	}
}

// TestAppendErrorJSONIsEncodingJSON: an error's JSON is the bytes of its
// ErrorReport.
func TestAppendErrorJSONIsEncodingJSON(t *testing.T) {
	for _, e := range []*ParseError{
		{Offset: 10, Segment: 2, Position: 3, SegmentID: "SE", Cause: ErrSESegmentCount, Detail: `SE01="x<y>", counted 3`},
		{Cause: ErrNotX12},
		{Offset: 1 << 40, Segment: 7, Cause: ErrIEAMissing},
	} {
		want, _ := json.Marshal(errorReports([]*ParseError{e})[0])
		want = bytes.ReplaceAll(bytes.ReplaceAll(want, []byte(`\u003c`), []byte("<")), []byte(`\u003e`), []byte(">"))
		if got := AppendErrorJSON(nil, e); !bytes.Equal(got, want) {
			t.Errorf("got %s\nwant %s", got, want)
		}
	}
}

// TestUnescapeHTMLIsEncodingWithoutHTMLEscaping: a string encoded the way
// json.Marshal does it, then unescaped, is the string encoded with HTML
// escaping off, byte for byte, even where the string itself holds a
// backslash followed by "u0026".
func TestUnescapeHTMLIsEncodingWithoutHTMLEscaping(t *testing.T) {
	pieces := []string{"a", "<", ">", "&", `\`, `\u0026`, `\\u003c`, "u003e", `"`, "\n", "\x01", "\u2028", "\xff", "é", ""}
	r := rand.New(rand.NewPCG(7, 11))
	for range 20000 {
		var s []byte
		for n := r.IntN(8); n > 0; n-- {
			s = append(s, pieces[r.IntN(len(pieces))]...)
		}
		html := AppendJSONStringHTML([]byte(`{"x":`), string(s))
		if want, _ := json.Marshal(string(s)); !bytes.Equal(html[5:], want) {
			t.Fatalf("AppendJSONStringHTML(%q) = %s, json.Marshal writes %s", s, html[5:], want)
		}
		got := UnescapeHTML(html, 5)
		var plain bytes.Buffer
		enc := json.NewEncoder(&plain)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(s)); err != nil {
			t.Fatal(err)
		}
		if want := append([]byte(`{"x":`), bytes.TrimSuffix(plain.Bytes(), []byte("\n"))...); !bytes.Equal(got, want) {
			t.Fatalf("UnescapeHTML of %q = %s, want %s", s, got, want)
		}
	}
}
