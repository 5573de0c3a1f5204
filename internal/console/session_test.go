package console_test

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/console"
)

// clock is a test clock several consoles read, each with its own skew.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) at(skew time.Duration) func() time.Time {
	return func() time.Time {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now.Add(skew)
	}
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// TestSignedOutSessionStaysRevokedOnAReplicaWhoseClockLags: replicas'
// clocks differ by a little. A session signed out on one stays refused on
// a replica whose clock runs two minutes behind, even after another
// replica's sign-out (which forgets revocations that have expired by its
// own clock) ran in the minutes the lagging replica still takes the
// cookie for unexpired.
func TestSignedOutSessionStaysRevokedOnAReplicaWhoseClockLags(t *testing.T) {
	st := memStore(t)
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clk := &clock{now: start}
	ttl := time.Hour
	slow := serve(t, st, func(c *console.Config) { c.Now, c.SessionTTL = clk.at(0), ttl })
	fast := serve(t, st, func(c *console.Config) { c.Now, c.SessionTTL = clk.at(2*time.Minute), ttl })

	b := newBrowser(t, slow)
	b.signIn(viewerToken)
	u, _ := url.Parse(slow.URL)
	cookies := b.c.Jar.Cookies(u)
	if resp, _ := b.do("POST", "/signout", url.Values{"csrf": {b.csrf}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %s", resp.Status)
	}
	replay := func() int {
		t.Helper()
		r := newBrowser(t, slow)
		r.c.Jar.SetCookies(u, cookies)
		resp, _ := r.do("GET", "/", nil, nil)
		return resp.StatusCode
	}
	if code := replay(); code != http.StatusSeeOther {
		t.Fatalf("the signed-out session replayed at once: %d", code)
	}

	// A minute before the session expires by the slow clock (a minute
	// after by the fast one), someone else signs out on the fast replica.
	clk.set(start.Add(ttl - time.Minute))
	other := newBrowser(t, fast)
	other.signIn(viewerToken)
	if resp, _ := other.do("POST", "/signout", url.Values{"csrf": {other.csrf}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("other sign-out: %s", resp.Status)
	}
	if code := replay(); code != http.StatusSeeOther {
		t.Errorf("a signed-out session accepted again on a replica whose clock lags: %d", code)
	}
}

// TestSessionFromAReplicaWhoseClockRunsAheadIsAccepted: a session signed
// in on a replica whose clock runs half a minute ahead is good at once on
// the others (its expiry lies a little past their now plus the TTL), so
// the redirect after signing in does not land on the sign-in page again.
func TestSessionFromAReplicaWhoseClockRunsAheadIsAccepted(t *testing.T) {
	st := memStore(t)
	clk := &clock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	ahead := serve(t, st, func(c *console.Config) { c.Now = clk.at(30 * time.Second) })
	behind := serve(t, st, func(c *console.Config) { c.Now = clk.at(0) })
	b := newBrowser(t, ahead)
	b.signIn(viewerToken)
	r := newBrowser(t, behind)
	r.c.Jar.SetCookies(mustURL(t, behind.URL), b.c.Jar.Cookies(mustURL(t, ahead.URL)))
	if resp, _ := r.do("GET", "/", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a session of a replica whose clock runs ahead refused: %s", resp.Status)
	}
}
