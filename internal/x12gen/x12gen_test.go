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
