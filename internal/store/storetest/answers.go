package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12/claim"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// testAnswerLookup: SetKey finds a processed set by its envelope with the
// interchange control number left out (exactly one key part between
// prefix and suffix), or any set of an interchange; never a rejected set.
// ClaimKey finds the latest claim.received effect of a claim by its
// ordering key (a replacement's after the original's).
func testAnswerLookup(t *testing.T, s store.Store) {
	ctx := context.Background()
	gen := func(c x12gen.Claims) []byte {
		var b bytes.Buffer
		if err := c.Write(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	r := mustIngest(t, s, "a.837", gen(x12gen.Claims{Sender: "RIVERSIDE", Receiver: "CLEARING", Control: 41}))
	if r.Sets[0].Outcome != inbox.Processed || len(r.Sets[0].EffectKeys) != 1 {
		t.Fatalf("837: %+v", r.Sets)
	}
	key, original := r.Sets[0].Key, r.Sets[0].EffectKeys[0]
	// A rejected set (SE01 wrong) of the same parties.
	broken := bytes.Replace(gen(x12gen.Claims{Sender: "RIVERSIDE", Receiver: "CLEARING", Control: 43}),
		[]byte("~SE*"), []byte("~SE*9"), 1)
	if r := mustIngest(t, s, "broken.837", broken); r.Sets[0].Outcome != inbox.Rejected {
		t.Fatalf("broken 837: %+v", r.Sets)
	}
	prefix := "x12:P:ZZ:RIVERSIDE:ZZ:CLEARING:"
	for _, c := range []struct{ prefix, suffix, want string }{
		{prefix, ":RIVERSIDE:CLEARING:41:837:0001", key},
		{prefix, ":RIVERSIDE:CLEARING:42:837:0001", ""},
		{prefix, ":RIVERSIDE:CLEARING:43:837:0001", ""},                   // rejected
		{"x12:P:ZZ:RIVERSIDE:ZZ:", ":RIVERSIDE:CLEARING:41:837:0001", ""}, // two parts between
		{"x12:P:ZZ:CLEARING:ZZ:RIVERSIDE:", ":RIVERSIDE:CLEARING:41:837:0001", ""},
		{prefix + "000000041:", "", key},
		{prefix + "000000042:", "", ""},
		{prefix + "000000043:", "", ""},
	} {
		if got, err := s.SetKey(ctx, c.prefix, c.suffix); err != nil || got != c.want {
			t.Errorf("SetKey(%s, %s) = %q, %v; want %q", c.prefix, c.suffix, got, err, c.want)
		}
	}
	order := claim.OrderingKey("ZZ:RIVERSIDE", "ZZ:CLEARING", claim.Claim{ClaimID: "CLAIM1"})
	if got, err := s.ClaimKey(ctx, order); err != nil || got != original {
		t.Errorf("ClaimKey = %q, %v; want %s", got, err, original)
	}
	r = mustIngest(t, s, "b.837", gen(x12gen.Claims{Sender: "RIVERSIDE", Receiver: "CLEARING", Control: 44, Frequency: "7"}))
	if got, err := s.ClaimKey(ctx, order); err != nil || got != r.Sets[0].EffectKeys[0] || got == original {
		t.Errorf("ClaimKey after a replacement = %q, %v; want %s", got, err, r.Sets[0].EffectKeys[0])
	}
	if got, err := s.ClaimKey(ctx, "claimorder:none"); err != nil || got != "" {
		t.Errorf("ClaimKey of an unknown claim = %q, %v", got, err)
	}
}
