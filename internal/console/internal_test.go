package console

import (
	"strings"
	"testing"
)

// TestKeysThatMayNameAPatientAreDigested: envelope keys and
// payment keys are shown as they are; a claim's effect key (and any other
// effect key) digested.
func TestKeysThatMayNameAPatientAreDigested(t *testing.T) {
	for _, tc := range []struct{ kind, key, want string }{
		{"conflict", "x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000011:ACMEHP:RIVERSIDE:11:835:0001", "x12:P:ZZ:ACMEHP"},
		{"effect_conflict", "payment:1512345678:EFT1", "payment:1512345678:EFT1"},
		{"effect_conflict", "claim:RIVERSIDE:ACMEHP:PCN0042:1", "claim.key:sha256:"},
		{"business_duplicate", "@audit:claim:RIVERSIDE:ACMEHP:PCN0042:1", "audit.key:sha256:"},
		{"conflict", "sha256:0badc0ffee", "sha256:0badc0ffee"},
	} {
		got := shownKey(tc.key)
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "PCN0042") {
			t.Errorf("%s %s: %s", tc.kind, tc.key, got)
		}
	}
}
