package console_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestOverviewShowsLastPollAndPollErrors: per source the overview shows
// each directory's last poll, as its lease holder recorded it in the
// store, with its age (stale past three poll intervals, failed when the
// last poll failed), today's poll errors and the last error's message; a
// configured source with no poll recorded is "never polled".
func TestOverviewShowsLastPollAndPollErrors(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		rec := func(source, dir string, at time.Time, msg string) {
			t.Helper()
			if err := st.RecordPoll(ctx, source, dir, "replica-2", inbox.Fence{}, at, msg); err != nil {
				t.Fatal(err)
			}
		}
		rec("test", "/in", now.Add(-3*time.Minute), "list: connection reset by peer")
		rec("test", "/in", now.Add(-2*time.Minute), "")
		rec("test", "/out", now.Add(-90*time.Second), "lease: context deadline exceeded")
		rec("stale", "/in", now.Add(-2*time.Hour), "")
		srv := serve(t, st, func(c *console.Config) {
			c.Sources = []string{"test", "stale", "quiet"}
			c.PollIntervals = map[string]time.Duration{"test": time.Minute, "stale": time.Minute, "quiet": time.Minute}
		})
		_, body := bearer(t, srv, "GET", "/", viewerToken, nil)
		row := func(source string) string {
			t.Helper()
			_, after, ok := strings.Cut(body, `<a href="/files?source=`+source+`">`)
			if !ok {
				t.Fatalf("no row for %s:\n%s", source, body)
			}
			r, _, _ := strings.Cut(after, "</tr>")
			return r
		}
		for source, want := range map[string][]string{
			"test": {`<span class="key">/in</span>: ` + now.Add(-2*time.Minute).Format("2006-01-02 15:04:05Z") +
				` <span class="badge ok">2m ago</span>`, `<span class="key">/out</span>: `, `1m ago, failed</span>`,
				`<td class="pollerrors"><span class="badge bad">2</span>`, `last: lease: context deadline exceeded`},
			"stale": {`2h0m ago, stale</span>`, `<td class="pollerrors">0</td>`},
			"quiet": {`<span class="badge bad">never polled</span>`},
		} {
			r := row(source)
			for _, w := range want {
				if !strings.Contains(r, w) {
					t.Errorf("%s lacks %q:\n%s", source, w, r)
				}
			}
		}
	})
}

// TestSinksShowRecentSuccessRateAndLatency: the overview and /sinks show
// per sink its attempts of the last hour by every replica (from the
// store), the share answered 2xx and their p50 / p95 latency.
func TestSinksShowRecentSuccessRateAndLatency(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		var remit bytes.Buffer
		x12gen.Remit{Control: 21}.Write(&remit)
		ingest(t, st, "era.835", remit.Bytes())
		now := time.Now().UTC()
		claim := func() outbox.Row {
			t.Helper()
			rows, err := st.Claim(ctx, time.Now().UTC(), []string{"ledger"}, 1, time.Minute)
			if err != nil || len(rows) != 1 {
				t.Fatalf("claim: %d rows, %v", len(rows), err)
			}
			return rows[0]
		}
		r := claim()
		if err := st.Retry(ctx, r.ID, r.LeaseToken, now, now, outbox.Failure{HTTPStatus: 503, Error: "HTTP 503",
			Attempt: &outbox.Attempt{At: now, Latency: 12 * time.Millisecond, HTTPStatus: 503, Class: "5xx"}}); err != nil {
			t.Fatal(err)
		}
		r = claim()
		if lost, err := st.CompleteMany(ctx, []outbox.Completion{{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 200,
			Attempt: &outbox.Attempt{At: now, Latency: 340 * time.Millisecond, HTTPStatus: 200, Class: "2xx"}}}, now); err != nil || len(lost) != 0 {
			t.Fatal(lost, err)
		}
		srv := serve(t, st, nil)
		for _, p := range []string{"/", "/sinks"} {
			_, body := bearer(t, srv, "GET", p, viewerToken, nil)
			_, ledger, ok := strings.Cut(body, "<td>ledger")
			if !ok {
				t.Fatalf("%s: no ledger row:\n%s", p, body)
			}
			ledger, _, _ = strings.Cut(ledger, "</tr>")
			want := `<td class="n">2</td><td class="n recent-ok"><span class="badge bad">50.0%</span></td><td>12ms / 340ms</td>`
			if !strings.Contains(ledger, want) {
				t.Errorf("%s: ledger row lacks %q:\n%s", p, want, ledger)
			}
		}
	})
}

// outcomeCounter counts the store's readings of sets by outcome.
type outcomeCounter struct {
	store.Store
	calls atomic.Int64
}

func (o *outcomeCounter) FileOutcomes(ctx context.Context, ids []string) (map[string]map[string]int, error) {
	o.calls.Add(1)
	return o.Store.FileOutcomes(ctx, ids)
}

// TestFilesListShowsSetsByOutcome: each file of the list shows its
// arrival's sets by outcome, read for the whole page at once.
func TestFilesListShowsSetsByOutcome(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		var remit, other bytes.Buffer
		x12gen.Remit{Control: 31}.Write(&remit)
		x12gen.Remit{Control: 32, Trace: "OTHER"}.Write(&other)
		ingest(t, st, "a.835", remit.Bytes())
		ingest(t, st, "a-again.835", remit.Bytes())
		ingest(t, st, "both.835", append(remit.Bytes(), other.Bytes()...))
		oc := &outcomeCounter{Store: st}
		srv := serve(t, oc, nil)
		_, body := bearer(t, srv, "GET", "/files", viewerToken, nil)
		for path, want := range map[string]string{
			"a.835":       `<span class="badge ok">1 processed</span></td>`,
			"a-again.835": `<span class="badge ok">1 duplicate</span></td>`,
			"both.835":    `<span class="badge ok">1 processed</span> · <span class="badge ok">1 duplicate</span></td>`,
		} {
			_, after, ok := strings.Cut(body, ">"+path+"</a>")
			if !ok {
				t.Fatalf("no row for %s:\n%s", path, body)
			}
			r, _, _ := strings.Cut(after, "</tr>")
			if !strings.Contains(r, want) {
				t.Errorf("%s lacks %q:\n%s", path, want, r)
			}
		}
		if n := oc.calls.Load(); n != 1 {
			t.Errorf("%d readings of sets by outcome for one page, want 1", n)
		}
	})
}

// TestSessionCookieWorksOnEveryReplica: behind a load balancer, a
// session signed in on one replica is accepted by another over the same
// store and token files (its CSRF token too), and signing out on one ends
// it on every replica. A replica whose viewer token was rotated refuses
// the viewer sessions signed before (an admin's stays), and a cookie
// whose role was edited is refused.
func TestSessionCookieWorksOnEveryReplica(t *testing.T) {
	st := memStore(t)
	a, b := serve(t, st, nil), serve(t, st, nil)
	rotated := serve(t, st, func(c *console.Config) { c.ViewerToken = "viewer-token-rotated-99" })
	onA := newBrowser(t, a)
	onA.signIn(viewerToken)
	ua, _ := url.Parse(a.URL)
	cookies := onA.c.Jar.Cookies(ua)
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	// The same browser, its requests sent to replica b.
	to := func(srv string, cks []*http.Cookie) *browser {
		br := &browser{t: t, base: srv, c: &http.Client{Jar: onA.c.Jar,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		u, _ := url.Parse(srv)
		br.c.Jar.SetCookies(u, cks)
		return br
	}
	onB := to(b.URL, cookies)
	if resp, body := onB.do("GET", "/", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "viewer") {
		t.Fatalf("replica b refused replica a's session: %s", resp.Status)
	}
	if onB.csrf == "" || onB.csrf != onA.csrf {
		t.Fatalf("CSRF tokens differ: a %q, b %q", onA.csrf, onB.csrf)
	}
	if resp, _ := to(rotated.URL, cookies).do("GET", "/", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a viewer session signed before the rotation accepted after: %s", resp.Status)
	}
	// A viewer cookie made to say admin.
	forged := *cookies[0]
	forged.Value = strings.Replace(forged.Value, ".viewer.", ".admin.", 1)
	if resp, _ := to(b.URL, []*http.Cookie{&forged}).do("GET", "/", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a forged admin cookie accepted: %s", resp.Status)
	}

	admin := newBrowser(t, a)
	admin.signIn(adminToken)
	adminCookies := admin.c.Jar.Cookies(ua)
	onRotated := &browser{t: t, base: rotated.URL, c: admin.c}
	onRotated.c.Jar.SetCookies(mustURL(t, rotated.URL), adminCookies)
	if resp, body := onRotated.do("GET", "/", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "admin") {
		t.Errorf("an admin session ended by the viewer token's rotation: %s", resp.Status)
	}

	// Signing out on b ends the session on a too.
	onB = to(b.URL, cookies)
	onB.do("GET", "/", nil, nil)
	if resp, _ := onB.do("POST", "/signout", url.Values{"csrf": {onB.csrf}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out on b: %s", resp.Status)
	}
	if resp, _ := to(a.URL, cookies).do("GET", "/", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a session signed out on b still accepted on a: %s", resp.Status)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
