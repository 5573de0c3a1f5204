package envelope

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestControlCharacterInAnElementRejectsTheSet: a NUL (or another control
// character that is no delimiter) inside an element of a set is outside
// the X12 character sets every HIPAA guide uses: the set is rejected
// with invalid_character at that segment (IK304 8), the error naming the
// byte, the element and the offset, never the content; a set without one
// is untouched, on the fast path and the general path alike.
func TestControlCharacterInAnElementRejectsTheSet(t *testing.T) {
	_, canonical := parseFile(t, "835_canonical.x12", Options{})
	at := bytes.Index(canonical, []byte("N1*PR*"))
	if at < 0 {
		t.Fatal("no N1*PR in the fixture")
	}
	for _, opts := range []Options{{}, {KeepSegments: true}} {
		bad := bytes.Clone(canonical)
		bad[at+8] = 0x00 // inside N102, the payer's name
		f, err := Parse(bytes.NewReader(bad), opts)
		if err != nil {
			t.Fatal(err)
		}
		set := f.Interchanges[0].Groups[0].Sets[0]
		if len(set.Errors) != 1 || !errors.Is(set.Errors[0], ErrInvalidCharacter) {
			t.Fatalf("keep %v: set errors %v, want invalid_character", opts.KeepSegments, set.Errors)
		}
		e := set.Errors[0]
		if e.SegmentID != "N1" || e.Offset != int64(at+8) || e.Position == 0 ||
			!strings.Contains(e.Error(), "byte 0x00 in element 2") || e.Cause.Segment != "8" {
			t.Errorf("keep %v: error %+v: %v", opts.KeepSegments, e, e)
		}
		if set.Valid() {
			t.Errorf("keep %v: a set with a NUL in an element is valid", opts.KeepSegments)
		}
	}
	// DEL alone in a segment (no other byte that sends it the slow way).
	trn := bytes.Index(canonical, []byte("TRN*1*"))
	del := bytes.Clone(canonical)
	del[trn+6] = 0x7F
	if f, err := Parse(bytes.NewReader(del), Options{}); err != nil || len(f.AllErrors()) != 1 ||
		!errors.Is(f.AllErrors()[0], ErrInvalidCharacter) || !strings.Contains(f.AllErrors()[0].Error(), "byte 0x7F") {
		t.Errorf("DEL in TRN02: %v %v", err, f.AllErrors())
	}
	// Spaces, colons and a control-character delimiter are data, not errors.
	if f, err := Parse(bytes.NewReader(canonical), Options{}); err != nil || len(f.AllErrors()) != 0 {
		t.Errorf("the canonical file: %v %v", err, f.AllErrors())
	}
	exotic := strings.NewReplacer("*", "\x1d", "~", "\x1c").Replace(string(canonical))
	if f, err := Parse(strings.NewReader(exotic), Options{}); err != nil || len(f.AllErrors()) != 0 {
		t.Errorf("control characters as delimiters: %v %v", err, f.AllErrors())
	}
}

// TestEnvelopeErrorsNameTheSegment: a segment too long outside a set
// names its identifier; an interchange that ends without its IEA says
// after which segment the file ends, or that an IEA sits inside the last
// segment because the terminator changed; counts read in their number.
func TestEnvelopeErrorsNameTheSegment(t *testing.T) {
	_, canonical := parseFile(t, "835_canonical.x12", Options{})
	st := bytes.Index(canonical, []byte("ST*"))
	long := append(append(bytes.Clone(canonical[:st]), []byte("NTE*"+strings.Repeat("X", 100<<10)+"~")...), canonical[st:]...)
	f, err := Parse(bytes.NewReader(long), Options{MaxSegment: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(joinErrors(f), "segment NTE longer than the maximum allowed") {
		t.Errorf("a segment too long between GS and ST: %s", joinErrors(f))
	}

	cut := canonical[:bytes.Index(canonical, []byte("SE*"))]
	f, _ = Parse(bytes.NewReader(cut), Options{})
	if msg := joinErrors(f); !strings.Contains(msg, "interchange ends without IEA: the file ends after segment") ||
		!strings.Contains(msg, "cut off") || strings.Contains(msg, "(truncated)") {
		t.Errorf("a file cut off: %s", msg)
	}

	// From the SE on, the segments end in a newline, not the ISA's '~'.
	se := bytes.Index(canonical, []byte("SE*"))
	changed := append(bytes.Clone(canonical[:se]), bytes.ReplaceAll(canonical[se:], []byte("~"), []byte("\n"))...)
	f, _ = Parse(bytes.NewReader(changed), Options{})
	if msg := joinErrors(f); !strings.Contains(msg, "an IEA is inside segment") || !strings.Contains(msg, "not ended by the terminator \"~\"") {
		t.Errorf("the terminator changed before the IEA: %s", msg)
	}
	if got := plural(1, "byte", "bytes") + ", " + plural(14, "byte", "bytes"); got != "1 byte, 14 bytes" {
		t.Errorf("plural: %q", got)
	}
}

func joinErrors(f *File) string {
	var msgs []string
	for _, e := range f.AllErrors() {
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "\n")
}
