package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func parseFile(t *testing.T, name string, opts Options) (*File, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(bytes.NewReader(data), opts)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return f, data
}

// TestGolden compares the full report of every fixture with its golden
// file. Run with -update to rewrite them after a deliberate change.
func TestGolden(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		n++
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			f, _ := parseFile(t, name, Options{})
			got, err := json.MarshalIndent(f.Report(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", name+".golden.json")
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
	if n < 30 {
		t.Fatalf("only %d fixtures found", n)
	}
}

func setHashes(f *File) []string {
	var out []string
	for s := range f.Sets() {
		out = append(out, s.HashHex())
	}
	return out
}

// TestResendVariantsKeyAndHashTheSame is the core promise of the keys: the
// same interchange re-sent with other delimiters, line endings, padding,
// wrapping or a BOM yields the same keys and the same content hash.
func TestResendVariantsKeyAndHashTheSame(t *testing.T) {
	base, _ := parseFile(t, "835_canonical.x12", Options{})
	if !base.Valid() {
		t.Fatalf("base fixture invalid: %v", base.AllErrors())
	}
	wantKeys, wantHashes := base.Keys(), setHashes(base)
	if len(wantKeys) != 1 || wantKeys[0] != "x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000101:ACMEHP:RIVERSIDE:101:835:0001" {
		t.Fatalf("base keys = %q", wantKeys)
	}
	for _, name := range []string{
		"835_crlf.x12", "835_newline_terminator.x12", "835_exotic_delimiters.x12",
		"835_stripped_isa.x12", "835_bom_whitespace.x12", "835_wrapped80.x12", "835_padded.x12",
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := parseFile(t, name, Options{})
			if !f.Valid() {
				t.Fatalf("invalid: %v", f.AllErrors())
			}
			if got := f.Keys(); !slices.Equal(got, wantKeys) {
				t.Errorf("keys = %q, want %q", got, wantKeys)
			}
			if got := setHashes(f); !slices.Equal(got, wantHashes) {
				t.Errorf("content hashes = %q, want %q", got, wantHashes)
			}
		})
	}

	changed, _ := parseFile(t, "835_changed_content.x12", Options{})
	if !slices.Equal(changed.Keys(), wantKeys) {
		t.Errorf("changed content: keys %q, want the same key %q", changed.Keys(), wantKeys)
	}
	if slices.Equal(setHashes(changed), wantHashes) {
		t.Error("one changed amount must change the content hash")
	}
	regen, _ := parseFile(t, "835_regenerated.x12", Options{})
	if slices.Equal(regen.Keys(), wantKeys) {
		t.Error("new control numbers must give a new key")
	}
	if want := "x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000202:ACMEHP:RIVERSIDE:202:835:0002"; !slices.Equal(regen.Keys(), []string{want}) {
		t.Errorf("regenerated keys = %q, want [%s]", regen.Keys(), want)
	}
}

func TestDelimitersPerInterchange(t *testing.T) {
	f, _ := parseFile(t, "multi_interchange.x12", Options{})
	if !f.Valid() {
		t.Fatalf("invalid: %v", f.AllErrors())
	}
	if len(f.Interchanges) != 3 {
		t.Fatalf("%d interchanges, want 3", len(f.Interchanges))
	}
	if d := f.Interchanges[0].Delimiters; d != Canonical {
		t.Errorf("first delimiters %v", d)
	}
	want := Delimiters{Element: '|', Repetition: '!', Component: '>', Segment: '\n'}
	if d := f.Interchanges[2].Delimiters; d != want {
		t.Errorf("third delimiters %v, want %v", d, want)
	}
	ta := f.Interchanges[1]
	if len(ta.TA1) != 1 || ta.TA1[0].ControlNumber != "000000055" || ta.TA1[0].AckCode != "A" {
		t.Errorf("TA1 = %+v", ta.TA1)
	}
	keys := f.Keys()
	wantKeys := []string{
		"x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000101:ACMEHP:RIVERSIDE:101:835:0001",
		"x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000102", // a TA1-only interchange is keyed by its envelope
		"x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000103:ACMEHP:RIVERSIDE:103:835:0001",
		"x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000103:ACMEHP:RIVERSIDE:103:835:0002",
	}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("keys:\n got %q\nwant %q", keys, wantKeys)
	}
	// The same 835 content under other delimiters hashes the same.
	h := setHashes(f)
	if h[0] != h[1] {
		t.Errorf("same set content under other delimiters hashed differently: %s vs %s", h[0], h[1])
	}

	tg, _ := parseFile(t, "ta1_before_gs.x12", Options{})
	if !tg.Valid() || len(tg.Interchanges[0].TA1) != 1 || len(tg.Keys()) != 1 {
		t.Errorf("TA1 before GS: valid=%v errors=%v", tg.Valid(), tg.AllErrors())
	}
}

// TestValidationErrors checks that each envelope error is found, typed,
// located at the right segment, and carries its acknowledgment code.
func TestValidationErrors(t *testing.T) {
	cases := []struct {
		file  string
		cause *Cause
		segID string // the segment the error points at ("" for end of input)
		ack   string
	}{
		{"err_iea01_count.x12", ErrIEAGroupCount, "IEA", "021"},
		{"err_iea02_mismatch.x12", ErrIEAControlNumber, "IEA", "001"},
		{"err_ge01_count.x12", ErrGESetCount, "GE", "5"},
		{"err_ge02_mismatch.x12", ErrGEControlNumber, "GE", "4"},
		{"err_se01_count.x12", ErrSESegmentCount, "SE", "4"},
		{"err_se02_mismatch.x12", ErrSEControlNumber, "SE", "3"},
		{"err_st02_duplicate.x12", ErrSTDuplicate, "ST", "23"},
		{"err_gs06_duplicate.x12", ErrGSDuplicate, "GS", "19"},
		{"err_truncated.x12", ErrSEMissing, "", "2"},
		{"err_truncated.x12", ErrGEMissing, "", "3"},
		{"err_truncated.x12", ErrIEAMissing, "", "023"},
		{"err_missing_ge.x12", ErrGEMissing, "IEA", "3"},
		{"err_missing_se.x12", ErrSEMissing, "ST", "2"},
		{"err_segment_id.x12", ErrSegmentID, "n3", "5"},
		{"err_outside_set.x12", ErrOutsideSet, "LX", "1"},
		{"err_isa_values.x12", ErrISAControlNumber, "ISA", "018"},
		{"err_isa_values.x12", ErrISAAckRequested, "ISA", "019"},
		{"err_isa_values.x12", ErrISAUsage, "ISA", "020"},
		{"err_ta1_syntax.x12", ErrTA1Syntax, "TA1", "024"},
		{"err_data_before_isa.x12", ErrDataBeforeISA, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.file+"/"+tc.cause.Code, func(t *testing.T) {
			f, data := parseFile(t, tc.file, Options{})
			if f.Valid() {
				t.Fatal("file reported valid")
			}
			var found *ParseError
			for _, e := range f.AllErrors() {
				if errors.Is(e, tc.cause) {
					found = e
				}
			}
			if found == nil {
				t.Fatalf("no %s error; got %v", tc.cause.Code, f.AllErrors())
			}
			if found.Cause.Ack != tc.ack {
				t.Errorf("ack code %q, want %q", found.Cause.Ack, tc.ack)
			}
			switch tc.segID {
			case "":
				if tc.cause == ErrDataBeforeISA {
					break
				}
				if found.Offset != int64(len(data)) {
					t.Errorf("missing trailer located at offset %d, want end of input %d", found.Offset, len(data))
				}
			default:
				if !bytes.HasPrefix(data[found.Offset:], []byte(tc.segID)) {
					t.Errorf("offset %d points at %q, want segment %s", found.Offset, data[found.Offset:min(len(data), int(found.Offset)+10)], tc.segID)
				}
				if found.Segment < 1 {
					t.Errorf("segment index %d", found.Segment)
				}
			}
			if tc.cause.Level == LevelSet && tc.segID != "" && tc.cause != ErrSEMissing && found.Position < 1 {
				t.Errorf("set-level error without a position in the set")
			}
		})
	}
}

func TestSegmentPositionForIK3(t *testing.T) {
	f, _ := parseFile(t, "err_segment_id.x12", Options{})
	s := f.Interchanges[0].Groups[0].Sets[0]
	if len(s.Errors) != 1 {
		t.Fatalf("errors %v", s.Errors)
	}
	// ST=1, BPR, TRN, DTM, N1, then the bad N3 at position 6.
	if e := s.Errors[0]; e.Position != 6 || e.SegmentID != "" && e.SegmentID != "n3" || e.Cause.Segment != "1" {
		t.Errorf("error %+v", e)
	}
}

func TestNotX12KeyedBySHA256(t *testing.T) {
	for _, tc := range []struct {
		file  string
		cause *Cause
	}{
		{"not_x12_utf16.x12", ErrUTF16},
		{"not_x12_text.txt", ErrNotX12},
		{"not_x12_binary.bin", ErrBinary},
		{"not_x12_empty.x12", ErrNotX12},
		{"not_x12_bad_isa.x12", ErrISAHeader},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, data := parseFile(t, tc.file, Options{})
			if f.X12 || f.Valid() {
				t.Fatalf("x12=%v valid=%v", f.X12, f.Valid())
			}
			sum := sha256.Sum256(data)
			want := "sha256:" + hex.EncodeToString(sum[:])
			if keys := f.Keys(); len(keys) != 1 || keys[0] != want {
				t.Errorf("keys %q, want [%s]", keys, want)
			}
			if len(f.Errors) != 1 || !errors.Is(f.Errors[0], tc.cause) {
				t.Errorf("errors %v, want %s", f.Errors, tc.cause.Code)
			}
		})
	}
}

// TestOversizeSegmentIsSkipped: a segment beyond MaxSegment is reported and
// skipped, memory stays bounded, and the next interchange is read normally.
func TestOversizeSegmentIsSkipped(t *testing.T) {
	_, canonical := parseFile(t, "835_canonical.x12", Options{})
	huge := "NTE*ADD*" + strings.Repeat("X", 3<<20)
	bad := bytes.Replace(canonical, []byte("LX*1~"), []byte(huge+"~LX*1~"), 1)
	bad = bytes.Replace(bad, []byte("SE*19*"), []byte("SE*20*"), 1)
	input := append(bad, bytes.Replace(canonical, []byte("000000101"), []byte("000000102"), 2)...)
	f, err := Parse(bytes.NewReader(input), Options{MaxSegment: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Interchanges) != 2 {
		t.Fatalf("%d interchanges", len(f.Interchanges))
	}
	first := f.Interchanges[0].Groups[0].Sets[0]
	if len(first.Errors) != 1 || !errors.Is(first.Errors[0], ErrSetSegmentTooLong) {
		t.Errorf("first set errors %v", first.Errors)
	}
	if first.SegmentCount != 20 {
		t.Errorf("oversize segment not counted: %d segments", first.SegmentCount)
	}
	if !f.Interchanges[1].Valid() {
		t.Errorf("second interchange: %v", f.AllErrors())
	}
}

func TestNoTerminatorAtAll(t *testing.T) {
	_, canonical := parseFile(t, "835_canonical.x12", Options{})
	head := canonical[:bytes.Index(canonical, []byte("ST*"))]
	input := append(head, bytes.Repeat([]byte("A"), 5<<20)...)
	f, err := Parse(bytes.NewReader(input), Options{MaxSegment: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, e := range f.AllErrors() {
		codes = append(codes, e.Cause.Code)
	}
	if !slices.Contains(codes, "segment_too_long") || !slices.Contains(codes, "iea_missing") {
		t.Errorf("codes %v", codes)
	}
}

func TestKeepSegmentsAndElementAccess(t *testing.T) {
	data, _ := os.ReadFile("testdata/835_exotic_delimiters.x12")
	rd := NewReader(bytes.NewReader(data), Options{KeepSegments: true})
	k, err := rd.Next()
	if err != nil || k != KindSet {
		t.Fatalf("Next = %v, %v", k, err)
	}
	segs := rd.Set().Segments()
	if len(segs) != 19 || segs[0].ID() != "ST" || segs[18].ID() != "SE" {
		t.Fatalf("%d segments", len(segs))
	}
	var svc Segment
	for _, s := range segs {
		if s.ID() == "SVC" {
			svc = s
		}
	}
	if got := string(svc.Comp(1, 2)); got != "99213" {
		t.Errorf("SVC01-2 = %q", got)
	}
	if got := string(svc.Comp(1, 3)); got != "25" {
		t.Errorf("SVC01-3 = %q", got)
	}
	if got := svc.Str(2); got != "200.00" {
		t.Errorf("SVC02 = %q", got)
	}
	if svc.Elem(4) == nil || len(svc.Elem(4)) != 0 || svc.Elem(9) != nil {
		t.Errorf("empty and absent elements: %q %q", svc.Elem(4), svc.Elem(9))
	}
	if !bytes.HasPrefix(data[svc.Offset:], []byte("SVC|")) {
		t.Errorf("segment offset %d does not point at SVC", svc.Offset)
	}
	for k != 0 {
		if k, err = rd.Next(); err != nil {
			break
		}
	}
}

func TestNormalizeExamples(t *testing.T) {
	exotic := Delimiters{Element: '|', Repetition: '!', Component: '>', Segment: '}'}
	for _, tc := range []struct {
		raw  string
		d    Delimiters
		want string
	}{
		{"NM1*IL*1*DOE*JANE****MI*123", Canonical, "NM1*IL*1*DOE*JANE****MI*123"},
		{"REF*6R*LINE001 **", Canonical, "REF*6R*LINE001"},
		{"SVC*HC:99213::*5", Canonical, "SVC*HC:99213*5"},
		{"HI*ABK:I10^ABF:E11^^", Canonical, "HI*ABK:I10^ABF:E11"},
		{"HI*A:^B", Canonical, "HI*A^B"},
		{"SVC|HC>99213|5", exotic, "SVC*HC:99213*5"},
		{"MSG|a*b:c^d~e\\f", exotic, `MSG*a\*b\:c\^d\~e\\f`},
		{"N1|PR|  ACME  |", exotic, "N1*PR*  ACME"},
	} {
		got := string(appendNormalized(nil, []byte(tc.raw), tc.d))
		if got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.raw, got, tc.want)
		}
		if tc.d == Canonical && isNormalized([]byte(tc.raw)) != (got == tc.raw) {
			t.Errorf("isNormalized(%q) = %v, but normal form is %q", tc.raw, !(got == tc.raw), got)
		}
	}
}

func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, Delimiters{Element: '|', Repetition: '!', Component: '>', Segment: '~'}, "\n")
	w.Segment("REF", "6R", "L1", "", "")
	w.Fields([]byte("SVC"), [][][][]byte{{{[]byte("HC"), []byte("99213")}}, {{[]byte("5")}}})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "REF|6R|L1~\nSVC|HC>99213|5~\n" {
		t.Errorf("wrote %q", got)
	}
}

// TestNormalSaysASetReadsAsItsNormalForm: Set.Normal is true exactly when
// every segment of the set was in normal form as read, delimiters and line
// breaks aside (the reader drops a segment's line breaks before it hands
// the segment on): the canonical file, CR LF between segments, other
// terminators and delimiters, a BOM and whitespace between segments,
// segments wrapped across lines; not padded elements, which hash as the
// canonical file does but are read otherwise. The fast path and the
// general one agree.
func TestNormalSaysASetReadsAsItsNormalForm(t *testing.T) {
	for name, want := range map[string]bool{
		"835_canonical.x12": true, "835_crlf.x12": true, "835_newline_terminator.x12": true,
		"835_exotic_delimiters.x12": true, "835_stripped_isa.x12": true, "835_bom_whitespace.x12": true,
		"835_wrapped80.x12": true, "835_padded.x12": false,
	} {
		for _, trace := range []func(Segment){nil, func(Segment) {}} {
			f, _ := parseFile(t, name, Options{Trace: trace})
			n := 0
			for s := range f.Sets() {
				n++
				if s.Normal != want {
					t.Errorf("%s (traced %v): set %s Normal %v, want %v", name, trace != nil, s.ControlNumber, s.Normal, want)
				}
			}
			if n == 0 {
				t.Errorf("%s: no set", name)
			}
		}
	}
}
