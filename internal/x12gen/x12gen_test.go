package x12gen

import (
	"bytes"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
)

// TestGeneratedFilesAreValid: what the generators write is valid X12 with
// the sets and segment counts they claim.
func TestGeneratedFilesAreValid(t *testing.T) {
	var remit, claims bytes.Buffer
	n, err := Remit{Interchanges: 2, SetsPerGroup: 3, ClaimsPerSet: 4, LinesPerClaim: 2, EOL: "\n"}.Write(&remit)
	if err != nil || n == 0 {
		t.Fatal(n, err)
	}
	if err := (Claims{Claims: 3}).Write(&claims); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"835": remit.Bytes(), "837": claims.Bytes()} {
		f, err := envelope.Parse(bytes.NewReader(b), envelope.Options{})
		if err != nil || !f.Valid() {
			t.Errorf("%s: %v %v", name, err, f.AllErrors())
		}
	}
}

// TestOtherDelimitersKeySame: the same remittance written with other
// delimiters and line endings keys and hashes the same.
func TestOtherDelimitersKeySame(t *testing.T) {
	var a, b bytes.Buffer
	Remit{Control: 7, Trace: "T"}.Write(&a)
	Remit{Control: 7, Trace: "T", Element: '|', Component: '>', Repetition: '!', Segment: '}', EOL: "\r\n"}.Write(&b)
	fa, _ := envelope.Parse(bytes.NewReader(a.Bytes()), envelope.Options{})
	fb, _ := envelope.Parse(bytes.NewReader(b.Bytes()), envelope.Options{})
	if !fb.Valid() || fa.Keys()[0] != fb.Keys()[0] ||
		fa.Interchanges[0].Groups[0].Sets[0].HashHex() != fb.Interchanges[0].Groups[0].Sets[0].HashHex() {
		t.Errorf("keys %v %v, errors %v", fa.Keys(), fb.Keys(), fb.AllErrors())
	}
}
