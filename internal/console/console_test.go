package console_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	viewerToken = "viewer-token-7f3a9c"
	adminToken  = "admin-token-c41d2e"
)

// serve starts a console over st behind an httptest server.
func serve(t *testing.T, st console.Store, edit func(*console.Config)) *httptest.Server {
	t.Helper()
	cfg := console.Config{ViewerToken: viewerToken, AdminToken: adminToken, Sources: []string{"test"},
		Sinks: []string{"acks", "ledger"}}
	if edit != nil {
		edit(&cfg)
	}
	c, err := console.New(cfg, st, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv
}

// browser is a client with a cookie jar that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T, srv *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: srv.URL, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]*)"`)

// do sends a request as a browser of the console's own pages would.
func (b *browser) do(method, path string, form url.Values, header map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindStringSubmatch(string(out)); m != nil && m[1] != "" {
		b.csrf = m[1]
	}
	return resp, string(out)
}

// signIn signs b in with token and loads the overview (and its CSRF token).
func (b *browser) signIn(token string) {
	b.t.Helper()
	resp, _ := b.do("POST", "/signin", url.Values{"token": {token}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("sign-in: %s", resp.Status)
	}
	if resp, _ := b.do("GET", "/", nil, nil); resp.StatusCode != http.StatusOK {
		b.t.Fatalf("overview after sign-in: %s", resp.Status)
	}
	if b.csrf == "" {
		b.t.Fatal("no CSRF token on the overview")
	}
}

// bearer sends a request with a bearer token, as a script would.
func bearer(t *testing.T, srv *httptest.Server, method, path, token string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, srv.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

// ingest records data as a file of source "test".
func ingest(t *testing.T, st store.Store, path string, data []byte) {
	t.Helper()
	if _, err := inbox.Ingest(context.Background(), inbox.Options{Store: st, Routes: storetest.Routes},
		inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: time.Now(), SHA256: "sha-" + path,
			CorrelationID: store.NewCorrelationID(), Now: time.Now().UTC()}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

// receiver is an HTTP sink's receiver: it refuses every request with 400
// (echoing the payload, as receivers do) until accept is set.
type receiver struct {
	srv       *httptest.Server
	accept    atomic.Bool
	delivered atomic.Int64
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !rc.accept.Load() {
			w.WriteHeader(http.StatusBadRequest)
			w.Write(body)
			return
		}
		rc.delivered.Add(1)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// relayUntil runs a relay delivering every sink to rc until done.
func relayUntil(t *testing.T, st store.Store, rc *receiver, done func() bool) {
	t.Helper()
	s, err := sink.New(sink.Config{Name: "ledger", URL: rc.srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Idle: 10 * time.Millisecond, BackoffBase: time.Millisecond,
		BackoffMax: time.Millisecond}, st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(),
		metrics.New(prometheus.NewRegistry()))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { r.Run(ctx); close(stopped) }()
	deadline := time.Now().Add(time.Minute) // a hang guard, not a timing assertion
	for !done() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-stopped
	if !done() {
		t.Fatal("the relay did not finish")
	}
}

// deadLetters ingests an 835 and an 837 and lets a receiver that answers
// 400 dead-letter every row; it returns the receiver and the dead rows.
func deadLetters(t *testing.T, st store.Store) (*receiver, []outbox.Row) {
	t.Helper()
	var remit, claims bytes.Buffer
	x12gen.Remit{Control: 11, ClaimsPerSet: 3}.Write(&remit)
	ingest(t, st, "era.835", remit.Bytes())
	x12gen.Claims{Control: 12, Claims: 2, IDPrefix: "ZQXPCN"}.Write(&claims)
	ingest(t, st, "claims.837", claims.Bytes())
	rc := newReceiver(t)
	relayUntil(t, st, rc, func() bool {
		c, _ := st.Counts(context.Background())
		return c.Outbox[outbox.StatusPending]+c.Outbox[outbox.StatusInflight] == 0
	})
	rows, err := st.ListDead(context.Background(), outbox.DeadFilter{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 3 {
		t.Fatalf("%d dead rows, want at least 3", len(rows))
	}
	return rc, rows
}

// memStore is a store for the tests that need no rows.
func memStore(t *testing.T) store.Store { return drivertest.SQLite(t) }

// TestSignInWithAWrongTokenIsRefused: a wrong token gets 401 and no
// session; without a session a page redirects to the sign-in form.
func TestSignInWithAWrongTokenIsRefused(t *testing.T) {
	srv := serve(t, memStore(t), nil)
	b := newBrowser(t, srv)
	resp, body := b.do("POST", "/signin", url.Values{"token": {"not-the-token"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Wrong token") {
		t.Errorf("wrong token: %s", resp.Status)
	}
	if len(resp.Cookies()) != 0 {
		t.Errorf("a refused sign-in set cookies: %v", resp.Cookies())
	}
	resp, _ = b.do("GET", "/dlq", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Errorf("page without a session: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	resp, _ = b.do("POST", "/dlq/replay", url.Values{"all": {"true"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("post without a session: %s", resp.Status)
	}
}

// TestSignInSetsAStrictHttpOnlySessionCookie: the session cookie is a
// random id, HttpOnly and SameSite=Strict (Secure when the console serves
// TLS), and signing out ends the session.
func TestSignInSetsAStrictHttpOnlySessionCookie(t *testing.T) {
	for _, secure := range []bool{false, true} {
		srv := serve(t, memStore(t), func(c *console.Config) { c.Secure = secure })
		b := newBrowser(t, srv)
		resp, _ := b.do("POST", "/signin", url.Values{"token": {viewerToken}}, nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in: %s", resp.Status)
		}
		cks := resp.Cookies()
		if len(cks) != 1 {
			t.Fatalf("cookies %v", cks)
		}
		ck := cks[0]
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure != secure || len(ck.Value) < 64 ||
			strings.Contains(ck.Value, viewerToken) {
			t.Errorf("secure %t: cookie %+v", secure, ck)
		}
		if secure {
			continue // the jar keeps a Secure cookie from a plain-HTTP server only for https
		}
		if resp, body := b.do("GET", "/", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "viewer") {
			t.Errorf("overview: %s", resp.Status)
		}
		if resp, _ := b.do("POST", "/signout", url.Values{"csrf": {b.csrf}}, nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("sign-out: %s", resp.Status)
		}
		b.c.Jar.SetCookies(resp.Request.URL, []*http.Cookie{ck}) // the old id, replayed
		if resp, _ := b.do("GET", "/", nil, nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after sign-out: %s", resp.Status)
		}
	}
}

// TestBearerTokenAuthenticatesEveryRequest: scripts send the token as a
// bearer token; a wrong one is refused, not treated as no token.
func TestBearerTokenAuthenticatesEveryRequest(t *testing.T) {
	srv := serve(t, memStore(t), nil)
	for _, p := range []string{"/", "/dlq", "/sinks", "/reconcile", "/files"} {
		for _, tok := range []string{viewerToken, adminToken} {
			if resp, _ := bearer(t, srv, "GET", p, tok, nil); resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %s", p, resp.Status)
			}
		}
		if resp, _ := bearer(t, srv, "GET", p, "wrong", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %s", p, resp.Status)
		}
	}
}

// TestSignInIsRateLimitedPerAddress: past the burst, attempts from one
// address are refused, even with the right token, until the budget
// refills; wrong bearer tokens draw on the same budget.
func TestSignInIsRateLimitedPerAddress(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	srv := serve(t, memStore(t), func(c *console.Config) {
		c.SignInBurst = 3
		c.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	b := newBrowser(t, srv)
	for i := range 2 {
		if resp, _ := b.do("POST", "/signin", url.Values{"token": {"guess"}}, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %s", i, resp.Status)
		}
	}
	if resp, _ := bearer(t, srv, "GET", "/", "guess", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bearer guess: %s", resp.Status)
	}
	if resp, _ := b.do("POST", "/signin", url.Values{"token": {adminToken}}, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("attempt past the burst: %s", resp.Status)
	}
	if resp, _ := bearer(t, srv, "GET", "/", "guess", nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("bearer guess past the burst: %s", resp.Status)
	}
	clock.Store(now.Add(time.Minute).UnixNano())
	if resp, _ := b.do("POST", "/signin", url.Values{"token": {adminToken}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after the budget refilled: %s", resp.Status)
	}
}

// TestEveryResponseHasStrictHeaders: pages, the sign-in form, static
// files, refusals and unknown paths all carry the CSP without inline
// script, frame denial, no referrer, nosniff and no-store.
func TestEveryResponseHasStrictHeaders(t *testing.T) {
	srv := serve(t, memStore(t), nil)
	want := map[string]string{
		"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-store",
	}
	check := func(what string, resp *http.Response) {
		for k, v := range want {
			if !strings.Contains(resp.Header.Get(k), v) {
				t.Errorf("%s: %s: %q, want %q", what, k, resp.Header.Get(k), v)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") ||
			strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", what, csp)
		}
	}
	b := newBrowser(t, srv)
	for _, p := range []string{"/signin", "/", "/static/console.css", "/static/console.js", "/nowhere"} {
		resp, _ := b.do("GET", p, nil, nil)
		check("GET "+p, resp)
	}
	for _, p := range []string{"/", "/dlq", "/sinks", "/reconcile", "/files", "/files/x", "/dlq/1", "/static/console.css"} {
		resp, _ := bearer(t, srv, "GET", p, viewerToken, nil)
		check("bearer GET "+p, resp)
	}
	resp, _ := bearer(t, srv, "POST", "/dlq/replay", viewerToken, url.Values{"all": {"true"}})
	check("viewer replay", resp)
	resp, _ = b.do("POST", "/signin", url.Values{"token": {"x"}}, map[string]string{"Origin": "https://evil.example"})
	check("cross-site sign-in", resp)
}

// TestTemplatesHoldNoInlineScriptOrStyle: the CSP forbids inline script
// and style, so no page may rely on any.
func TestTemplatesHoldNoInlineScriptOrStyle(t *testing.T) {
	srv := serve(t, memStore(t), nil)
	inline := regexp.MustCompile(`(?i)<script>|<script [^>]*>[^<]|<style|style="|\son[a-z]+=`)
	for _, p := range []string{"/", "/dlq", "/sinks", "/reconcile", "/files", "/signin"} {
		_, body := bearer(t, srv, "GET", p, adminToken, nil)
		if m := inline.FindString(body); m != "" {
			t.Errorf("%s: inline %q", p, m)
		}
	}
}

// TestNonLoopbackWithoutTLSIsRefused: plain HTTP is served on loopback
// only, unless TLS is configured or allow_insecure says so.
func TestNonLoopbackWithoutTLSIsRefused(t *testing.T) {
	for _, tc := range []struct {
		addr          string
		tls, insecure bool
		ok            bool
	}{
		{"127.0.0.1:9465", false, false, true},
		{"localhost:9465", false, false, true},
		{"[::1]:9465", false, false, true},
		{"0.0.0.0:9465", false, false, false},
		{":9465", false, false, false},
		{"192.0.2.7:9465", false, false, false},
		{"0.0.0.0:9465", true, false, true},
		{"0.0.0.0:9465", false, true, true},
	} {
		err := console.CheckListen(tc.addr, tc.tls, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("%s tls=%t insecure=%t: %v", tc.addr, tc.tls, tc.insecure, err)
		}
		if err != nil && !strings.Contains(err.Error(), "tls_cert_file") {
			t.Errorf("%s: unclear error %v", tc.addr, err)
		}
	}
}

// TestTokensMustDifferAndNotBeEmpty: an empty viewer token, or an admin
// token equal to the viewer's, is refused at start.
func TestTokensMustDifferAndNotBeEmpty(t *testing.T) {
	st := memStore(t)
	if _, err := console.New(console.Config{}, st, zap.NewNop()); err == nil {
		t.Error("empty viewer token accepted")
	}
	if _, err := console.New(console.Config{ViewerToken: "a", AdminToken: "a"}, st, zap.NewNop()); err == nil {
		t.Error("equal tokens accepted")
	}
}
