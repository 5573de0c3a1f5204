package remit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A payment with no CLP (a provider-level-adjustment-only 835) encoded
// "claims":[] before the fast parser (Parse started from Claims: []Claim{});
// the effect payload and its hash must not change.
func TestReviewPaymentWithoutClaimsEncodesEmptyClaimsArray(t *testing.T) {
	base := canonical(t)
	i, j := strings.Index(base, "LX*1~"), strings.Index(base, "SE*19*")
	text := base[:i] + "PLB*1234567893*20261231*WO:X1*-150.00~" + base[j:]
	p, _ := parseOne(t, text)
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(want, []byte(`"claims":[]`)) {
		t.Errorf("fresh Parse of a payment without claims: want \"claims\":[] as before, got %s", want)
	}
	if got := p.AppendJSON(nil); !bytes.Contains(got, []byte(`"claims":[]`)) {
		t.Errorf("AppendJSON: want \"claims\":[] as before, got %s", got)
	}
}
