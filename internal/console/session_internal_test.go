package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// revocations is a Store that records the sessions revoked; nothing
// else is called by a sign-out.
type revocations struct {
	Store
	ids []string
}

func (r *revocations) SessionRevoked(context.Context, string) (bool, error) { return false, nil }

func (r *revocations) RevokeSession(_ context.Context, id string, _, _ time.Time) error {
	r.ids = append(r.ids, id)
	return nil
}

// TestSessionIDsOfAnotherFormAreRefused: a viewer holds the viewer token,
// from which its sessions' key derives, so it can sign cookies itself.
// Only ids of the form the console issues are accepted, so a viewer (who
// only reads) cannot have a sign-out write an id of its choosing, of any
// length, to the store's revocations: a megabyte a request, kept for
// hours.
func TestSessionIDsOfAnotherFormAreRefused(t *testing.T) {
	st := &revocations{}
	c, err := New(Config{ViewerToken: "viewer-token", AdminToken: "admin-token"}, st, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for _, id := range []string{strings.Repeat("ab", 100_000), "not-hex-not-hex-not-hex-not-hex!", "0123456789ABCDEF0123456789ABCDEF", ""} {
		body := strings.Join([]string{sessionVersion, roleViewer.String(), exp, id}, ".")
		cookie := body + "." + c.mac(roleViewer, body)
		form := url.Values{"csrf": {c.mac(roleViewer, "csrf."+id)}}
		req := httptest.NewRequest("POST", "/signout", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		if len(st.ids) != 0 {
			t.Fatalf("id of %d bytes accepted and revoked (%d)", len(id), rec.Code)
		}
	}
	// The console's own ids are still accepted.
	v := c.newSession(roleViewer, time.Now())
	s, ok := c.verifySession(v, time.Now())
	if !ok {
		t.Fatal("the console's own session refused")
	}
	req := httptest.NewRequest("POST", "/signout", strings.NewReader(url.Values{"csrf": {c.csrfOf(s)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: v})
	c.ServeHTTP(httptest.NewRecorder(), req)
	if len(st.ids) != 1 || st.ids[0] != s.id {
		t.Errorf("revoked %v, want [%s]", st.ids, s.id)
	}
}

// TestSignOutsAreRateLimited: a viewer can sign viewer sessions itself
// (its token is the key's source), so each sign-out would otherwise store
// a revocation of its choosing, kept for hours: a flood of sign-outs
// fills the store. Sign-outs spend the address's sign-in budget; past it
// the cookie is still cleared in the browser but nothing is stored.
func TestSignOutsAreRateLimited(t *testing.T) {
	st := &revocations{}
	c, err := New(Config{ViewerToken: "viewer-token", AdminToken: "admin-token", SignInBurst: 3, SignInRate: 0.001},
		st, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	cleared := 0
	for range 20 {
		v := c.newSession(roleViewer, time.Now())
		s, ok := c.verifySession(v, time.Now())
		if !ok {
			t.Fatal("the console's own session refused")
		}
		req := httptest.NewRequest("POST", "/signout", strings.NewReader(url.Values{"csrf": {c.csrfOf(s)}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: v})
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		for _, ck := range rec.Result().Cookies() {
			if ck.Name == sessionCookie && ck.MaxAge < 0 {
				cleared++
			}
		}
	}
	if len(st.ids) != 3 {
		t.Errorf("%d sign-outs from one address stored %d revocations, want the budget of 3", 20, len(st.ids))
	}
	if cleared != 20 {
		t.Errorf("%d of 20 sign-outs cleared the cookie", cleared)
	}
}
