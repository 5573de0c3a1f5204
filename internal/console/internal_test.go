package console

import (
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestKeysThatMayNameAPatientAreDigested: envelope keys and
// payment keys are shown as they are; a claim's effect key (and any other
// effect key) digested.
func TestKeysThatMayNameAPatientAreDigested(t *testing.T) {
	for _, tc := range []struct{ kind, key, want string }{
		{"conflict", "x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000000011:ACMEHP:RIVERSIDE:11:835:0001", "x12:P:ZZ:ACMEHP"},
		{"effect_conflict", "payment:1512345678:EFT1", "payment:1512345678:EFT1"},
		{"effect_conflict", "claim:RIVERSIDE:ACMEHP:PCN0042:1", "claim.key:sha256:"},
		// A sighting recorded before migration 0014 may name a further
		// sink's row by its old "@SINK:" key: digested all the same.
		{"business_duplicate", "@audit:claim:RIVERSIDE:ACMEHP:PCN0042:1", "@audit.key:sha256:"},
		{"conflict", "sha256:0badc0ffee", "sha256:0badc0ffee"},
	} {
		got := shownKey(tc.key)
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "PCN0042") {
			t.Errorf("%s %s: %s", tc.kind, tc.key, got)
		}
	}
}

// TestRateLimitMapStaysBounded: addresses still spending their budget
// are not evicted, and once the map is full new addresses share one
// overflow budget instead of growing it without bound (an IPv6 client
// has addresses to spare).
func TestRateLimitMapStaysBounded(t *testing.T) {
	c, err := New(Config{ViewerToken: "v", AdminToken: "a"}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxLimiters + 500 {
		r := httptest.NewRequest("POST", "/signin", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		c.allowAttempt(r)
	}
	if n := len(c.limiters); n > maxLimiters+1 {
		t.Errorf("%d limiters, want at most %d", n, maxLimiters+1)
	}
}

// TestLocalhostNamingAnotherMachineIsRefused: "localhost" passes as
// loopback only when every address it resolves to is loopback; a hosts
// file or resolver pointing it at a routable address would otherwise
// serve tokens in clear on the network.
func TestLocalhostNamingAnotherMachineIsRefused(t *testing.T) {
	defer func(old func(string) ([]net.IP, error)) { lookupIP = old }(lookupIP)
	lookupIP = func(string) ([]net.IP, error) {
		return []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("192.0.2.7")}, nil
	}
	if err := CheckListen("localhost:9465", false, false); err == nil {
		t.Error("localhost resolving to 192.0.2.7 accepted")
	}
	lookupIP = func(string) ([]net.IP, error) { return []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, nil }
	if err := CheckListen("LocalHost:9465", false, false); err != nil {
		t.Errorf("loopback localhost: %v", err)
	}
}
