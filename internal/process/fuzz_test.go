package process

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
)

// FuzzFileAcknowledgmentsReadBack asserts that no input panics
// processing, and that every 999 and TA1 built for it is X12 that
// ediwatch's own reader accepts: its delimiters, control numbers and
// counts consistent, whatever the received file held. (An acknowledgment
// of an interchange whose own sender or receiver is blank repeats the
// blank: those errors alone are allowed.)
func FuzzFileAcknowledgmentsReadBack(f *testing.F) {
	for _, dir := range []string{"../envelope/testdata", "../x12/remit/testdata", "../x12/claim/testdata"} {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.x12"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("ISA|00|          |00|          |ZZ|ACME*HP        |ZZ|RIVER~SIDE     |261130|0930|^|00501|000000101|1|P|>\n" +
		"GS|HP|ACME*HP|RIVER:SIDE|20261130|0930|101|X|005010X221A1\nST|835|00*1\nBPR|I|1|C|CHK\nSE|3|00*1\n" +
		"GE|1|101\nIEA|1|000000101\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var acks []string
		_, err := File(context.Background(), bytes.NewReader(data),
			Config{ControlNumbers: &ack.MemoryControlNumbers{}, Ack: ack.Options{Now: fixedNow},
				Envelope: envelope.Options{MaxSegment: 8 << 10}},
			func(it Item) error {
				if it.Ack != nil {
					acks = append(acks, x12Of(t, *it.Ack))
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range acks {
			a, err := envelope.Parse(strings.NewReader(x), envelope.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !a.X12 || len(a.Interchanges) != 1 {
				t.Fatalf("acknowledgment not one interchange: %v\n%q", a.AllErrors(), x)
			}
			for _, e := range a.AllErrors() {
				switch e.Cause {
				case envelope.ErrISASenderQual, envelope.ErrISASenderID, envelope.ErrISAReceiverQual, envelope.ErrISAReceiverID:
				default:
					t.Fatalf("acknowledgment not valid: %v\n%q\nfor %q", e, x, data)
				}
			}
		}
	})
}
