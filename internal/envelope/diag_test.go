package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDiagnosticsGolden compares the report of every fixture under
// testdata/diag (one per diagnostic the reader gives) with its golden file.
// Run with -update to rewrite them after a deliberate change.
func TestDiagnosticsGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "diag", "*.x12"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("%d diagnostic fixtures: %v", len(paths), err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f := parseDiag(t, filepath.Base(p))
			got, err := json.MarshalIndent(f.Report(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "diag", "golden", filepath.Base(p)+".golden.json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("report differs from %s (run go test -update after checking the change):\n%s", golden, got)
			}
		})
	}
}

func parseDiag(t *testing.T, name string) *File {
	t.Helper()
	f, _ := parseFile(t, filepath.Join("diag", name), Options{})
	return f
}

func warningCodes(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Code)
	}
	return out
}

// TestWarningsAtEveryLevelLeaveTheFileValid: a file with a BOM, a stripped
// ISA with a 14-character ISA08, CR LF after every terminator, an empty
// segment, a padded GS06 with GE02 written without its zeros, padded ST02
// and SE02, IEA02 without the zeros of ISA13 and no final terminator is
// valid, and says each of these at its level.
func TestWarningsAtEveryLevelLeaveTheFileValid(t *testing.T) {
	f := parseDiag(t, "warnings_each_level.x12")
	if !f.Valid() {
		t.Fatalf("not valid: %v", f.AllErrors())
	}
	ix := f.Interchanges[0]
	g := ix.Groups[0]
	s := g.Sets[0]
	for _, c := range []struct {
		level string
		got   []string
		want  []string
	}{
		{"file", warningCodes(f.Warnings), []string{WarnUTF8BOM, WarnLeadingWhitespace}},
		{"interchange", warningCodes(ix.Warnings), []string{WarnISAFieldWidth, WarnIEA02Zeros, WarnLineBreaks, WarnEmptySegment, WarnFinalTerminator}},
		{"group", warningCodes(g.Warnings), []string{WarnGroupPadding, WarnGE02Zeros}},
		{"set", warningCodes(s.Warnings), []string{WarnSetPadding, WarnSetPadding}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s warnings %v, want %v", c.level, c.got, c.want)
		}
	}
	if m := ix.Warnings[0].Message; !strings.Contains(m, "ISA08 is 14 characters, not 15") {
		t.Errorf("ISA width warning %q does not name ISA08", m)
	}
	if m := ix.Warnings[1].Message; !strings.Contains(m, `IEA02="3438"`) || !strings.Contains(m, `ISA13="000003438"`) {
		t.Errorf("IEA02 warning %q", m)
	}
}

// TestStraySegmentsAreNamedAndCounted: the segments after a mangled ST are
// reported once, naming the first one's identifier, how many followed and
// the delimiters read from the ISA.
func TestStraySegmentsAreNamedAndCounted(t *testing.T) {
	f := parseDiag(t, "outside_set_counted.x12")
	errs := f.AllErrors()
	if len(errs) != 1 || !errors.Is(errs[0], ErrOutsideSet) {
		t.Fatalf("errors %v, want one outside_set", errs)
	}
	want := `segment 3 (offset 162): segment T outside any transaction set: 14 more segments after it; ` +
		`delimiters read from the ISA: element "*", repetition "^", component ":", segment terminator "~"`
	if got := errs[0].Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestStrayCountIsFinalWhenStreamed: a run of stray segments ends at the
// segment that ends or opens a level, before Next returns, so the error
// ReportErrors streams already carries the final count.
func TestStrayCountIsFinalWhenStreamed(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "diag", "outside_set_counted.x12"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	emit := func(e *ParseError) error { got = append(got, e.Error()); return nil }
	rd := NewReader(bytes.NewReader(data), Options{})
	re := NewReportErrors(rd)
	for {
		k, err := rd.Next()
		if err != nil {
			break
		}
		re.Collect(k, emit)
	}
	re.Finish(emit)
	if len(got) != 1 || !strings.Contains(got[0], "14 more segments after it") {
		t.Errorf("streamed errors %q", got)
	}
}

// TestDelimitersNamedPrintably: an envelope error names the delimiters
// read from the ISA as an operator reads them.
func TestDelimitersNamedPrintably(t *testing.T) {
	for _, c := range []struct {
		d    Delimiters
		crlf bool
		want string
	}{
		{Canonical, false, `element "*", repetition "^", component ":", segment terminator "~"`},
		{Delimiters{Element: '|', Component: '>', Segment: '\n'}, false, `element "|", repetition none, component ">", segment terminator LF`},
		{Delimiters{Element: '*', Component: ':', Segment: '\r'}, true, `segment terminator CR LF`},
		{Delimiters{Element: 0x1D, Repetition: 0x1E, Component: 0x1F, Segment: 0x1C}, false, `element 0x1D, repetition 0x1E, component 0x1F, segment terminator 0x1C`},
	} {
		if got := describeDelims(c.d, c.crlf); !strings.HasSuffix(got, c.want) {
			t.Errorf("%v: %s, want ...%s", c.d, got, c.want)
		}
	}
	f, _ := parseFile(t, "err_truncated.x12", Options{})
	ixErrs := f.Interchanges[0].Errors
	if len(ixErrs) != 1 || !errors.Is(ixErrs[0], ErrIEAMissing) || !strings.Contains(ixErrs[0].Error(), `segment terminator "~"`) {
		t.Errorf("iea_missing does not name the delimiters: %v", ixErrs)
	}
}

// TestLeadingPunctuationIsReadWithAWarning: an interchange whose
// terminator is LF and whose every later segment starts with "~" is read
// as the same interchange written with clean delimiters: the same keys and
// content hashes, valid, with one warning.
func TestLeadingPunctuationIsReadWithAWarning(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "diag", "leading_punctuation.x12"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(bytes.NewReader(data), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Valid() {
		t.Fatalf("not valid: %v", f.AllErrors())
	}
	if got := warningCodes(f.Interchanges[0].Warnings); !slices.Equal(got, []string{WarnLeadingPunctuation}) {
		t.Errorf("warnings %v", got)
	}
	// The same interchange with "|" elements and a "~" terminator.
	clean := strings.ReplaceAll(string(data), "\n~", "~")
	clean = strings.TrimSuffix(strings.Replace(clean, ":\n", ":~", 1), "\n") + "~"
	c, err := Parse(strings.NewReader(clean), Options{})
	if err != nil || !c.Valid() || len(c.Interchanges[0].Warnings) != 0 {
		t.Fatalf("clean form %q: %v %v", clean, err, c.AllErrors())
	}
	if !slices.Equal(f.Keys(), c.Keys()) || !slices.Equal(setHashes(f), setHashes(c)) {
		t.Errorf("keys %v hashes %v, clean form %v %v", f.Keys(), setHashes(f), c.Keys(), setHashes(c))
	}
}

// TestISADateAndTimeErrorsReportedTogether: ISA09 260230 (no 30 February)
// and ISA10 2460 are both reported, with TA105 codes 014 and 015.
func TestISADateAndTimeErrorsReportedTogether(t *testing.T) {
	f := parseDiag(t, "isa_date_time.x12")
	var got []string
	for _, e := range f.Interchanges[0].Errors {
		got = append(got, e.Cause.Code+"/"+e.Cause.Ack)
	}
	if want := []string{"isa_date/014", "isa_time/015"}; !slices.Equal(got, want) {
		t.Errorf("errors %v, want %v", got, want)
	}
}

// TestISA09AndISA10AreRealDatesAndTimes checks the calendar and the clock,
// not the digit count.
func TestISA09AndISA10AreRealDatesAndTimes(t *testing.T) {
	for v, ok := range map[string]bool{"261130": true, "240229": true, "260229": false, "000000": false,
		"261301": false, "261100": false, "260431": false, "26113": false, "2611301": false, "": false, "26a130": false} {
		if validDate(v) != ok {
			t.Errorf("validDate(%q) = %v", v, !ok)
		}
	}
	for v, ok := range map[string]bool{"0000": true, "2359": true, "2400": false, "9999": false, "1260": false, "930": false, "": false} {
		if validTime(v) != ok {
			t.Errorf("validTime(%q) = %v", v, !ok)
		}
	}
}

// TestISA13AndDateAndTimeAllReported: all three header failures are listed,
// ISA13 first.
func TestISA13AndDateAndTimeAllReported(t *testing.T) {
	isa := "ISA*00*          *00*          *ZZ*ACMEHP         *ZZ*RIVERSIDE      *000000*9999*^*00501*00000010X*0*P*:~"
	f, err := Parse(strings.NewReader(isa+"IEA*0*00000010X~"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range f.Interchanges[0].Errors {
		got = append(got, e.Cause.Code)
	}
	if want := []string{"isa13_syntax", "isa_date", "isa_time"}; !slices.Equal(got, want) {
		t.Errorf("errors %v, want %v", got, want)
	}
}

// TestDuplicateISA13FromOneSenderIsReported: the second interchange of a
// file reusing the first one's ISA13 (same sender) is rejected with TA105
// 025; the first stays valid.
func TestDuplicateISA13FromOneSenderIsReported(t *testing.T) {
	f := parseDiag(t, "isa13_duplicate.x12")
	if !f.Interchanges[0].Valid() {
		t.Errorf("first interchange: %v", f.Interchanges[0].Errors)
	}
	errs := f.Interchanges[1].Errors
	if len(errs) != 1 || !errors.Is(errs[0], ErrISADuplicate) || errs[0].Cause.Ack != "025" {
		t.Fatalf("second interchange errors %v", errs)
	}
	// Another sender may use the same ISA13.
	other := strings.Replace(string(mustRead(t, "diag/isa13_duplicate.x12")), "ZZ*ACMEHP         *ZZ*RIVERSIDE      *261130*0931",
		"ZZ*OTHERHP        *ZZ*RIVERSIDE      *261130*0931", 1)
	f2, err := Parse(strings.NewReader(other), Options{})
	if err != nil || !f2.Valid() {
		t.Errorf("two senders, one ISA13: %v %v", err, f2.AllErrors())
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLeadingPunctuationWithLineBreaksReadsAsWithout: line breaks are
// never data, so an interchange whose every segment starts with a stray
// "~" followed by a line break that is not its terminator ("~\nGS|...",
// terminator CR) reads as the one without the line breaks ("~GS|..."): the
// same segments, keys, hashes and verdict. It was read as a stray segment
// "~GS" outside any group, though the same interchange re-sent without the
// line breaks was read as a leading-punctuation one
// (FuzzReader: testdata/fuzz/FuzzReader/4db7cd1da6741085). When the line
// break is the terminator, "~" is a segment of its own and stays one
// (testdata/fuzz/FuzzReader/d00a428c548c6cd4).
func TestLeadingPunctuationWithLineBreaksReadsAsWithout(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "diag", "leading_punctuation.x12"))
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's terminator is LF; here it is CR, and an LF follows
	// each stray "~".
	clean := strings.ReplaceAll(string(data), "\n", "\r")
	want, err := Parse(strings.NewReader(clean), Options{})
	if err != nil || !want.Valid() {
		t.Fatalf("fixture: %v %v", err, want.AllErrors())
	}
	broken := strings.ReplaceAll(clean, "\r~", "\r~\n")
	got, err := Parse(strings.NewReader(broken), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Valid() {
		t.Fatalf("not valid: %v", got.AllErrors())
	}
	if !slices.Equal(got.Keys(), want.Keys()) || !slices.Equal(setHashes(got), setHashes(want)) {
		t.Errorf("keys %v hashes %v, want %v %v", got.Keys(), setHashes(got), want.Keys(), setHashes(want))
	}
	if codes := warningCodes(got.Interchanges[0].Warnings); !slices.Contains(codes, WarnLeadingPunctuation) {
		t.Errorf("warnings %v, want %s among them", codes, WarnLeadingPunctuation)
	}
}

// TestBlankInterchangePartiesAreRejected: an ISA whose sender or receiver
// id is blank, or whose qualifier is not two letters or digits, names no
// partner: its keys cannot tell it from another sender's, and its
// acknowledgment would be addressed to nobody. It is rejected with the
// TA105 code of the element (005 to 008). Before, it was read as valid.
func TestBlankInterchangePartiesAreRejected(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "835_canonical.x12"))
	if err != nil {
		t.Fatal(err)
	}
	isa, rest := string(data[:106]), string(data[106:])
	for _, c := range []struct {
		name, from, to string
		want           []string
	}{
		{"blank ISA06", "*ZZ*ACMEHP         *", "*ZZ*               *", []string{"isa06_value/006"}},
		{"blank ISA07 and ISA08", "*ZZ*RIVERSIDE      *", "*  *               *", []string{"isa07_value/007", "isa08_value/008"}},
		{"one-letter ISA05", "*ZZ*ACMEHP         *", "*Z *ACMEHP         *", []string{"isa05_value/005"}},
	} {
		in := strings.Replace(isa, c.from, c.to, 1) + rest
		if len(in) != len(data) {
			t.Fatalf("%s: fixture length %d", c.name, len(in))
		}
		f, err := Parse(strings.NewReader(in), Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range f.Interchanges[0].Errors {
			got = append(got, e.Cause.Code+"/"+e.Cause.Ack)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: errors %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSignedCountsAreNoCounts: SE01, GE01 and IEA01 are counts of type
// N0, digits alone: "+19" is no count, though strconv.Atoi reads it as
// 19; each trailer's count error is reported, as for any other value
// that is not the count.
func TestSignedCountsAreNoCounts(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "835_canonical.x12"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"SE*19*0001~", "SE*+19*0001~", "se01_count"},
		{"GE*1*101~", "GE*+1*101~", "ge01_count"},
		{"IEA*1*000000101~", "IEA*+1*000000101~", "iea01_count"},
		{"SE*19*0001~", "SE*019*0001~", ""}, // leading zeros are digits
	} {
		f, err := Parse(strings.NewReader(strings.Replace(string(data), c.from, c.to, 1)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range f.AllErrors() {
			got = append(got, e.Cause.Code)
		}
		if want := []string{c.want}; c.want == "" && len(got) != 0 || c.want != "" && !slices.Equal(got, want) {
			t.Errorf("%s: errors %v, want %q", c.to, got, c.want)
		}
	}
}

// TestPaddingOutsideInterchangesIsAWarning: NUL padding (a fixed-block
// transfer) or a DOS end-of-file byte (0x1A) after the last interchange,
// or between two, is skipped with one warning, not an error that marks
// the file invalid; other bytes there are still an error.
func TestPaddingOutsideInterchangesIsAWarning(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "835_canonical.x12"))
	if err != nil {
		t.Fatal(err)
	}
	ix := string(data)
	for _, c := range []struct {
		name, in string
		valid    bool
	}{
		{"dos eof", ix + "\x1a", true},
		{"nul block", ix + strings.Repeat("\x00", 300), true},
		{"line break and eof", ix + "\r\n\x1a", true},
		{"between interchanges", ix + "\x1a\x00\r\n" + strings.Replace(ix, "000000101", "000000102", 2) + "\x00", true},
		{"garbage", ix + "\x1aGARBAGE", false},
	} {
		f, err := Parse(strings.NewReader(c.in), Options{})
		if err != nil {
			t.Fatal(err)
		}
		warned := f.WarningCounts[WarnPadding]
		if f.Valid() != c.valid || c.valid && warned != 1 {
			t.Errorf("%s: valid %v (want %v), %d padding warnings, errors %v", c.name, f.Valid(), c.valid, warned, f.AllErrors())
		}
	}
}
