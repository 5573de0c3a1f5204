package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemo runs the demo and checks every number of its summary: the same
// payment re-delivered five ways posts once, an encrypted one posts, the malformed and non-X12
// files are rejected with their acknowledgments, the partner's 999 and
// 277CA become events, every acknowledgment sent is also a file in the
// partner's SFTP inbound folder, nothing is dead.
func TestDemo(t *testing.T) {
	var logs bytes.Buffer
	sum, err := runDemo(context.Background(), false, &logs)
	if err != nil {
		t.Fatal(err)
	}
	// The partner's 999 and 277CA are sets processed into events (no 999
	// answers either); the 8 999s and the TA1 sent also land as files in
	// the partner's SFTP inbound folder.
	// The sixth payment came as an OpenPGP message: decrypted, its
	// signature verified, posted; the files sent back are encrypted to the
	// partner and signed (demoUploaded counts only those).
	want := demoSummary{Files: 15, Sets: 15, Processed: 9, Duplicates: 3, BusinessDuplicates: 1, Conflicts: 0,
		Rejected: 2, PaymentsPosted: 6, ClaimsPosted: 3, Acks999: 9, AcksTA1: 1, SFTPFiles: 10, AcksReceived: 1,
		ClaimStatuses: 4, ClaimsRejected: 1, Requests: 24, BadSignatures: 0, DLQ: 0}
	got := *sum
	got.Elapsed = 0
	if got != want {
		t.Errorf("summary\n got %+v\nwant %+v\nlogs:\n%s", got, want, logs.String())
	}
	if sum.Elapsed.Seconds() > 15 {
		t.Errorf("took %s", sum.Elapsed)
	}
	var out bytes.Buffer
	if err := sum.print(&out); err != nil || !strings.Contains(out.String(), "payments posted (one per real payment)             6") ||
		!strings.Contains(out.String(), "uploaded to the partner's SFTP /inbound          10") {
		t.Errorf("printed:\n%s", out.String())
	}
	// The demo's files hold invented patients; none reaches the logs.
	for _, phi := range []string{"PATIENT", "MBR0", "TEST"} {
		if strings.Contains(logs.String(), phi) {
			t.Errorf("logs hold %q", phi)
		}
	}
}
