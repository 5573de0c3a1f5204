package console_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// TestAdminSignOutEndsTheSessionPastTheBudget: sign-in attempts and
// sign-outs share an address's budget, and behind a proxy or a NAT every
// operator shares one address. Someone guessing tokens from there spends
// it, and an admin's sign-out then only cleared the cookie in the
// browser: a copy of the admin cookie stayed good for its 12 hours while
// the admin saw the sign-in page. Only an admin can sign admin cookies,
// so an admin's sign-out is recorded whatever the budget.
func TestAdminSignOutEndsTheSessionPastTheBudget(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, func(c *console.Config) { c.SignInBurst, c.SignInRate = 3, 0.001 })
		admin := newBrowser(t, srv)
		admin.signIn(adminToken)
		u, _ := url.Parse(srv.URL)
		copied := admin.c.Jar.Cookies(u)

		guesser := newBrowser(t, srv)
		for i := 0; ; i++ {
			resp, _ := guesser.do("POST", "/signin", url.Values{"token": {"guess"}}, nil)
			if resp.StatusCode == http.StatusTooManyRequests {
				break
			}
			if i == 10 {
				t.Fatal("sign-in attempts were not limited")
			}
		}

		if resp, _ := admin.do("POST", "/signout", url.Values{"csrf": {admin.csrf}}, nil); resp.StatusCode != http.StatusSeeOther ||
			resp.Header.Get("Location") != "/signin" {
			t.Fatalf("sign-out: %s %s", resp.Status, resp.Header.Get("Location"))
		}
		thief := newBrowser(t, srv)
		thief.c.Jar.SetCookies(u, copied)
		if resp, _ := thief.do("GET", "/", nil, nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("a copy of the signed-out admin cookie still opens the overview: %s", resp.Status)
		}
	})
}
