package sink

import (
	"strings"
	"testing"
)

// TestLogKeyOfReceivedAcknowledgments: an ack.received key (partner ids
// and control numbers) is logged as it is; a claim.status key, which
// belongs to a claim of a patient, only as a digest.
func TestLogKeyOfReceivedAcknowledgments(t *testing.T) {
	k := "ackrcv:ZZ:CLEARING:ZZ:RIVERSIDE:999:HC:41:837:0001:0123456789abcdef"
	if got := LogKey("ack.received", k); got != k {
		t.Errorf("ack.received: %s", got)
	}
	if got := LogKey("claim.status", "claimstatus:PCN-1"); strings.Contains(got, "PCN-1") ||
		!strings.HasPrefix(got, "claim.status:sha256:") {
		t.Errorf("claim.status: %s", got)
	}
}
