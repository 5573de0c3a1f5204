package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// chromiumPath returns the headless Chromium the browser tests drive:
// EDIWATCH_TEST_CHROMIUM (scripts/test.sh installs Debian's chromium and
// sets it) or chromium on the PATH. Without one the test is skipped, and
// under CI=true it fails.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("EDIWATCH_TEST_CHROMIUM")
	if p == "" {
		p, _ = exec.LookPath("chromium")
	}
	if p == "" {
		if testenv.InCI() {
			t.Fatal("no chromium: run scripts/test.sh, which installs Debian's chromium")
		}
		t.Skip("no chromium (scripts/test.sh installs it)")
	}
	return p
}

// newBrowserTab starts a headless Chromium and returns a tab's context,
// both closed when t ends.
func newBrowserTab(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		acancel()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		chromedp.Cancel(ctx)
		cancel()
		acancel()
	})
	return ctx
}

// run runs steps in the tab under a hang guard, failing t on an error.
func run(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, time.Minute) // a hang guard, not a timing assertion
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// into makes a step of an action that returns a value, storing the value in
// dst, so that a run can read the page among its other steps.
func into[T any](dst *T, a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		v, err := a(ctx, t)
		if err != nil {
			return err
		}
		*dst = v
		return nil
	})
}

// screenshot saves the page as name.png in EDIWATCH_SCREENSHOTS, when set
// (scripts/screenshots.sh refreshes the README's).
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	dir := os.Getenv("EDIWATCH_SCREENSHOTS")
	if dir == "" {
		return
	}
	var png []byte
	run(t, tab, "screenshot "+name, into(&png, chromedp.FullScreenshot(100)))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowser drives the console in headless Chromium: a wrong token is
// refused; a viewer sees no actions and the server refuses the viewer's
// replay; a cross-site form post is refused; an admin opens every screen,
// filters the dead letters, selects a row, confirms its replay and sees
// it delivered by the receiver that refused it before.
func TestBrowser(t *testing.T) {
	st := drivertest.SQLite(t)
	rc, rows := deadLetters(t, st)
	pay := rowOfKind(t, rows, "payment.posted")
	id := strconv.FormatInt(pay.ID, 10)
	// The poller holding the drop's lease recorded a good poll, then a
	// failed one.
	for i, msg := range []string{"", "list: connection reset by peer"} {
		at := time.Now().UTC().Add(time.Duration(i-2) * time.Minute)
		if err := st.RecordPoll(context.Background(), "test", "/outbound/835", "replica-1", inbox.Fence{}, at, msg); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, st, func(c *console.Config) { c.PollIntervals = map[string]time.Duration{"test": time.Minute} })
	tab := newBrowserTab(t)

	var text string
	run(t, tab, "wrong token", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "not-the-token"), chromedp.Click(chromedp.CSS("form.signin button")),
		chromedp.WaitVisible(chromedp.CSS("p.error")), into(&text, chromedp.Text(chromedp.CSS("p.error"))))
	if !strings.Contains(text, "Wrong token") {
		t.Errorf("wrong token: %q", text)
	}
	screenshot(t, tab, "signin")

	// A viewer: no actions offered, and a replay posted anyway (with the
	// session's CSRF token) is refused.
	signInBrowser(t, tab, srv.URL, viewerToken)
	var offered bool
	var code int
	run(t, tab, "viewer dlq", chromedp.Navigate(srv.URL+"/dlq"), chromedp.WaitVisible(chromedp.CSS("table")),
		into(&offered, chromedp.Evaluate[bool](`document.querySelector('button[formaction="/dlq/replay"]') !== null`)),
		into(&code, chromedp.Evaluate[int](fmt.Sprintf(`fetch('/dlq/replay', {method: 'POST', body: new URLSearchParams({
			csrf: document.querySelector('input[name=csrf]').value, ids: '%s', confirm: 'yes'})}).then(r => r.status)`, id),
			chromedp.EvalAwaitPromise)))
	if offered || code != http.StatusForbidden {
		t.Errorf("viewer: actions offered %t, replay answered %d", offered, code)
	}
	run(t, tab, "sign out", chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.ID("token")))

	// An admin, signed in, visits another site whose page posts a replay
	// form to the console.
	signInBrowser(t, tab, srv.URL, adminToken)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/go.js" {
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, `document.getElementById("f").submit();`)
			return
		}
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/dlq/replay"><input name="all" value="true">
<input name="confirm" value="yes"></form><script src="/go.js"></script>`, srv.URL)
	}))
	defer evil.Close()
	run(t, tab, "cross-site post", chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)),
		waitLocation("/dlq/replay"), into(&text, chromedp.Text(chromedp.CSS("body"))))
	if !strings.Contains(text, "cross-site request refused") {
		t.Errorf("cross-site post: %q", text)
	}
	if got := status(t, st, pay.ID); got != outbox.StatusDead {
		t.Fatalf("row %s after the cross-site post", got)
	}

	// The admin opens every screen; the stylesheet and script load under
	// the CSP.
	var bg string
	for _, p := range []struct{ path, shot, wait string }{
		{"/", "overview", "section.cards"},
		{"/files", "files", "table"},
		{"/sinks", "sinks", "table"},
		{"/reconcile", "reconcile", "table"},
	} {
		run(t, tab, p.path, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		screenshot(t, tab, p.shot)
	}
	// The overview's poll status per source and recent attempts per sink
	// (the receiver answered 400 to every one).
	var polls, pollErrors string
	var okShares []string
	run(t, tab, "overview fields", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("td.polls")),
		into(&polls, chromedp.Text(chromedp.CSS("td.polls"))), into(&pollErrors, chromedp.Text(chromedp.CSS("td.pollerrors"))),
		into(&okShares, chromedp.Evaluate[[]string](`[...document.querySelectorAll("td.recent-ok")].map(e => e.textContent)`)))
	if !strings.Contains(polls, "/outbound/835") || !strings.Contains(polls, "ago, failed") {
		t.Errorf("overview last poll: %q", polls)
	}
	if !strings.Contains(pollErrors, "1") || !strings.Contains(pollErrors, "last: list: connection reset by peer") {
		t.Errorf("overview poll errors: %q", pollErrors)
	}
	if len(okShares) != 2 || okShares[0] != "0.0%" || okShares[1] != "0.0%" {
		t.Errorf("overview 2xx of the last hour per sink: %q", okShares)
	}
	run(t, tab, "style", into(&bg, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("header")).backgroundColor`)))
	if bg != "rgb(22, 32, 43)" {
		t.Errorf("stylesheet not applied: header background %q", bg)
	}
	run(t, tab, "a file", chromedp.Navigate(srv.URL+"/files"), chromedp.WaitVisible(chromedp.CSS("table")),
		chromedp.Click(chromedp.Search(`//a[text()="era.835"]`)), chromedp.WaitVisible(chromedp.CSS("dl.facts")),
		into(&text, chromedp.Text(chromedp.CSS("main"))))
	if !strings.Contains(text, "processed") || !strings.Contains(text, "payment.posted") {
		t.Errorf("file page: %q", text)
	}
	screenshot(t, tab, "file")

	// Filter the dead letters by sink, select the payment's row (select
	// all, then all but it, exercises the script), replay, confirm.
	var checked int
	run(t, tab, "filter", chromedp.Navigate(srv.URL+"/dlq"), chromedp.WaitVisible(chromedp.CSS("form.filter")),
		chromedp.SetValue(chromedp.CSS(`select[name="sink"]`), "ledger"),
		chromedp.Click(chromedp.CSS("form.filter button")), waitLocation("sink=ledger"),
		chromedp.WaitReady(chromedp.CSS(`input[type="hidden"][name="sink"][value="ledger"]`)),
		chromedp.WaitVisible(chromedp.ID("select-all")),
		chromedp.Click(chromedp.ID("select-all")),
		into(&checked, chromedp.Evaluate[int](`document.querySelectorAll('input[name="ids"]:checked').length`)))
	if checked < 2 {
		t.Errorf("select all checked %d rows", checked)
	}
	screenshot(t, tab, "dlq")
	run(t, tab, "select", chromedp.Click(chromedp.ID("select-all")),
		chromedp.Click(chromedp.CSS(`input[name="ids"][value="`+id+`"]`)),
		chromedp.Click(chromedp.CSS(`button[formaction="/dlq/replay"]:not([name])`)), waitLocation("/dlq/replay"),
		chromedp.WaitVisible(chromedp.CSS("h1")), into(&text, chromedp.Text(chromedp.CSS("h1"))))
	if text != "Confirm: replay 1 dead rows" {
		t.Fatalf("confirmation: %q", text)
	}
	screenshot(t, tab, "confirm")
	if got := status(t, st, pay.ID); got != outbox.StatusDead {
		t.Fatalf("row %s before the confirmation", got)
	}
	run(t, tab, "confirm", chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)), waitLocation("done=replay"),
		chromedp.WaitVisible(chromedp.CSS("p.done")), into(&text, chromedp.Text(chromedp.CSS("p.done"))))
	if text != "1 rows queued for delivery again." {
		t.Errorf("outcome: %q", text)
	}
	rc.accept.Store(true)
	relayUntil(t, st, rc, func() bool { return status(t, st, pay.ID) == outbox.StatusDelivered })
	run(t, tab, "row", chromedp.Navigate(srv.URL+"/dlq/"+id), chromedp.WaitVisible(chromedp.CSS("dl.facts")),
		into(&text, chromedp.Text(chromedp.CSS("dl.facts"))))
	if !strings.Contains(text, "delivered") {
		t.Errorf("row page after the replay: %q", text)
	}
	screenshot(t, tab, "row")
	if rc.delivered.Load() != 1 {
		t.Errorf("receiver got %d deliveries, want 1", rc.delivered.Load())
	}
}

// waitLocation waits until the tab's location holds substr, through the
// navigation a form submission starts.
func waitLocation(substr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for {
			if loc, err := chromedp.Location()(ctx, t); err == nil && strings.Contains(loc, substr) {
				_, err := chromedp.WaitReady(chromedp.CSS("body"))(ctx, t)
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// signInBrowser signs the tab in with token.
func signInBrowser(t *testing.T, tab context.Context, base, token string) {
	t.Helper()
	run(t, tab, "sign in", chromedp.Navigate(base+"/signin"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS("form.signin button")),
		chromedp.WaitVisible(chromedp.CSS("section.cards")))
}
