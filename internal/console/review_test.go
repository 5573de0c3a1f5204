package console_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestBearerGuessingStopsPastTheBudget: once an address has spent its
// budget on wrong bearer tokens, a right one is refused too, so the
// limit is no oracle a guesser can keep querying (a 429 for wrong and a
// 200 for right would let guessing go on at full speed). Right tokens
// sent within the budget draw nothing from it.
func TestBearerGuessingStopsPastTheBudget(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	srv := serve(t, memStore(t), func(c *console.Config) {
		c.SignInBurst = 3
		c.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	for range 10 {
		if resp, _ := bearer(t, srv, "GET", "/sinks", viewerToken, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("right token: %s", resp.Status)
		}
	}
	for i := range 3 {
		if resp, _ := bearer(t, srv, "GET", "/sinks", "guess", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %s (right tokens drew on the budget)", i, resp.Status)
		}
	}
	if resp, _ := bearer(t, srv, "GET", "/sinks", "guess", nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("guess past the burst: %s", resp.Status)
	}
	if resp, _ := bearer(t, srv, "GET", "/sinks", adminToken, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("right token past the burst: %s, want 429 (a guesser learns it found the token)", resp.Status)
	}
	clock.Store(now.Add(time.Minute).UnixNano())
	if resp, _ := bearer(t, srv, "GET", "/sinks", adminToken, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("after the budget refilled: %s", resp.Status)
	}
}

// TestSignInBudgetCoversAnIPv6Prefix: an IPv6 client holds a whole /64
// (often far more), so the budget is per /64, not per address: rotating
// the low bits must not buy fresh attempts.
func TestSignInBudgetCoversAnIPv6Prefix(t *testing.T) {
	c, err := console.New(console.Config{ViewerToken: viewerToken, AdminToken: adminToken, SignInBurst: 3}, memStore(t), nopLog())
	if err != nil {
		t.Fatal(err)
	}
	status := func(remote string) int {
		req := httptest.NewRequest("POST", "/signin", strings.NewReader(url.Values{"token": {"guess"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		return rec.Code
	}
	for i, a := range []string{"[2001:db8:1:2::1]:5000", "[2001:db8:1:2::2]:5001", "[2001:db8:1:2:aaaa::3]:5002"} {
		if got := status(a); got != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, got)
		}
	}
	if got := status("[2001:db8:1:2:ffff:ffff:ffff:ffff]:5003"); got != http.StatusTooManyRequests {
		t.Errorf("a fourth guess from the same /64: %d, want 429", got)
	}
	if got := status("[2001:db8:1:3::1]:5004"); got != http.StatusUnauthorized {
		t.Errorf("another /64: %d, want 401", got)
	}
	if got := status("192.0.2.1:5005"); got != http.StatusUnauthorized {
		t.Errorf("an IPv4 address: %d, want 401", got)
	}
}

func nopLog() *zap.Logger { return zap.NewNop() }

// limitRecorder is a store that remembers the largest limit a listing of
// dead rows asked for.
type limitRecorder struct {
	store.Store
	max  atomic.Int64
	full atomic.Int64 // listings with payloads and responses
}

func (l *limitRecorder) ListDead(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error) {
	l.record(limit)
	l.full.Add(1)
	return l.Store.ListDead(ctx, f, limit)
}

func (l *limitRecorder) ListDeadBrief(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error) {
	l.record(limit)
	return l.Store.ListDeadBrief(ctx, f, limit)
}

func (l *limitRecorder) record(limit int) {
	if int64(limit) > l.max.Load() {
		l.max.Store(int64(limit))
	}
}

// TestConfirmationReadsOnlyTheRowsItLists: confirming "all matching"
// counts the rows in the store and reads only the ones it lists: rows
// carry their payloads and receivers' responses, and a dead-letter queue
// after an outage can hold hundreds of thousands, which must not all be
// loaded into the daemon's memory for one page. The count stays exact.
func TestConfirmationReadsOnlyTheRowsItLists(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		_, rows := deadLetters(t, st)
		rec := &limitRecorder{Store: st}
		srv := serve(t, rec, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		resp, body := b.do("POST", "/dlq/discard", url.Values{"csrf": {b.csrf}, "all": {"true"}}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("confirmation: %s", resp.Status)
		}
		if want := fmt.Sprintf("Confirm: discard %d dead rows", len(rows)); !strings.Contains(body, want) {
			t.Errorf("confirmation lacks %q", want)
		}
		if got := rec.max.Load(); got > 501 {
			t.Errorf("the confirmation read up to %d rows, more than it lists", got)
		}
		if n, err := st.CountDead(context.Background(), outbox.DeadFilter{Kind: "claim.received"}); err != nil || n == 0 || n >= len(rows) {
			t.Errorf("count of claim rows: %d %v (of %d)", n, err, len(rows))
		}
	})
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`)

// TestConfirmedAllMatchingActsOnTheRowsConfirmed: "all matching" asks
// for a confirmation naming a count; rows dead-lettered after it (a
// receiver still failing) are not swept into the action the operator
// confirmed for fewer rows, and the page's Cancel link keeps the filter.
func TestConfirmedAllMatchingActsOnTheRowsConfirmed(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		rc, rows := deadLetters(t, st)
		srv := serve(t, st, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		resp, body := b.do("POST", "/dlq/discard", url.Values{"csrf": {b.csrf}, "all": {"true"}, "sink": {"ledger"}}, nil)
		want := 0
		for _, r := range rows {
			if r.Sink == "ledger" {
				want++
			}
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, fmt.Sprintf("Confirm: discard %d dead rows", want)) {
			t.Fatalf("confirmation: %s, want %d rows\n%s", resp.Status, want, body)
		}
		if !strings.Contains(body, `href="/dlq?sink=ledger"`) {
			t.Errorf("the Cancel link loses the filter:\n%s", body)
		}
		form := url.Values{}
		for _, m := range hiddenField.FindAllStringSubmatch(body, -1) {
			form.Add(m[1], html.UnescapeString(m[2]))
		}
		if form.Get("confirm") != "yes" || form.Get("all") != "true" {
			t.Fatalf("confirmation form %v", form)
		}
		var more bytes.Buffer
		x12gen.Remit{Control: 21, ClaimsPerSet: 2, Trace: "LATERTRN"}.Write(&more)
		ingest(t, st, "era2.835", more.Bytes())
		relayUntil(t, st, rc, func() bool {
			c, _ := st.Counts(context.Background())
			return c.Outbox[outbox.StatusPending]+c.Outbox[outbox.StatusInflight] == 0
		})
		if n, _ := st.CountDead(context.Background(), outbox.DeadFilter{Sink: "ledger"}); n <= want {
			t.Fatalf("no row dead-lettered after the confirmation (%d)", n)
		}
		resp, _ = b.do("POST", "/dlq/discard", form, nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, fmt.Sprintf("&n=%d", want)) {
			t.Errorf("discard: %s to %q, want n=%d (the rows confirmed)", resp.Status, loc, want)
		}
	})
}

// TestSigningInAgainEndsTheEarlierSession: a browser that signs in again
// (a viewer switching to the admin token) gets a new session and the
// one its cookie held ends, so the earlier id replayed is refused.
func TestSigningInAgainEndsTheEarlierSession(t *testing.T) {
	srv := serve(t, memStore(t), nil)
	b := newBrowser(t, srv)
	b.signIn(viewerToken)
	u, _ := url.Parse(srv.URL)
	old := b.c.Jar.Cookies(u)
	if len(old) != 1 {
		t.Fatalf("cookies %v", old)
	}
	b.signIn(adminToken)
	if now := b.c.Jar.Cookies(u); len(now) != 1 || now[0].Value == old[0].Value {
		t.Fatalf("no new session id: %v", now)
	}
	b.c.Jar.SetCookies(u, old)
	if resp, _ := b.do("GET", "/", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the earlier session replayed: %s", resp.Status)
	}
}

// TestDeadLetterListingsReadNoPayloads: the dead-letter page and the
// confirmation list up to 501 rows and show neither payloads nor
// responses, so they read neither: a payment's payload can run to
// megabytes, and 501 of them would be loaded for one page view.
func TestDeadLetterListingsReadNoPayloads(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		_, rows := deadLetters(t, st)
		rec := &limitRecorder{Store: st}
		srv := serve(t, rec, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		if resp, body := b.do("GET", "/dlq", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`href="/dlq/%d"`, rows[0].ID)) {
			t.Fatalf("dlq: %s", resp.Status)
		}
		if resp, _ := b.do("POST", "/dlq/replay", url.Values{"csrf": {b.csrf}, "all": {"true"}}, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("confirmation: %s", resp.Status)
		}
		if n := rec.full.Load(); n != 0 {
			t.Errorf("%d listings read every row's payload and response", n)
		}
		brief, err := st.ListDeadBrief(context.Background(), outbox.DeadFilter{}, 100)
		if err != nil || len(brief) != len(rows) {
			t.Fatalf("brief %d rows, %v; want %d", len(brief), err, len(rows))
		}
		for i, r := range brief {
			if len(r.Payload) != 0 || r.LastResponse != "" || r.ID != rows[i].ID || r.EffectKey != rows[i].EffectKey ||
				r.LastError != rows[i].LastError || !r.UpdatedAt.Equal(rows[i].UpdatedAt) {
				t.Errorf("brief row %+v, full %+v", r, rows[i])
			}
		}
	})
}

// TestALongDisableReasonIsCutOnACharacter: a reason over 200 bytes is
// cut to at most 200 on a character boundary, not inside one (PostgreSQL
// refuses invalid UTF-8, and the disable would fail).
func TestALongDisableReasonIsCutOnACharacter(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, nil)
		reason := strings.Repeat("a", 199) + "é and more"
		resp, body := bearer(t, srv, "POST", "/sinks/ledger/disable", adminToken, url.Values{"reason": {reason}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("disable: %s %s", resp.Status, body)
		}
		states, err := st.SinkStates(context.Background())
		if err != nil || len(states) != 1 {
			t.Fatalf("states %v %v", states, err)
		}
		if got := states[0].Reason; !utf8.ValidString(got) || len(got) > 200 || !strings.HasPrefix(got, strings.Repeat("a", 199)) {
			t.Errorf("reason %q", got)
		}
	})
}

// TestStaticServesFilesNotListings: /static/ is served without a
// session, so it serves the stylesheet and the script and nothing else:
// no directory listing.
func TestStaticServesFilesNotListings(t *testing.T) {
	srv := serve(t, memStore(t), nil)
	b := newBrowser(t, srv)
	for _, p := range []string{"/static/", "/static/.", "/static//"} {
		if resp, body := b.do("GET", p, nil, nil); resp.StatusCode == http.StatusOK || strings.Contains(body, "console.js") {
			t.Errorf("GET %s: %s\n%s", p, resp.Status, body)
		}
	}
	for _, p := range []string{"/static/console.css", "/static/console.js"} {
		if resp, _ := b.do("GET", p, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", p, resp.Status)
		}
	}
}

// TestReplayConfirmationWarnsOfPassedClaims: the confirmation of a
// replay says how many of its rows are claim events that a later event
// of the same claim (here a void, delivered after the original died)
// passed: replayed, they arrive after it.
func TestReplayConfirmationWarnsOfPassedClaims(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		for i, freq := range []string{"1", "8"} { // the claim, then its void
			var b bytes.Buffer
			x12gen.Claims{Control: 40 + i, Claims: 1, IDPrefix: "ZQXPCN", Frequency: freq}.Write(&b)
			ingest(t, st, fmt.Sprintf("c%d.837", i), b.Bytes())
		}
		now := time.Now().UTC()
		original, err := st.Claim(ctx, now, []string{"ledger"}, 10, time.Minute)
		if err != nil || len(original) != 1 {
			t.Fatalf("claim: %d %v", len(original), err)
		}
		if err := st.Dead(ctx, original[0].ID, original[0].LeaseToken, now, outbox.Failure{HTTPStatus: 422, Error: "HTTP 422"}); err != nil {
			t.Fatal(err)
		}
		srv := serve(t, st, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		confirm := func() string {
			t.Helper()
			resp, body := b.do("POST", "/dlq/replay", url.Values{"csrf": {b.csrf}, "all": {"true"}}, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("confirmation: %s", resp.Status)
			}
			return body
		}
		if body := confirm(); strings.Contains(body, "passed while they were dead") {
			t.Errorf("warned of a passed claim while its void waits undelivered")
		}
		void, err := st.Claim(ctx, now, []string{"ledger"}, 10, time.Minute)
		if err != nil || len(void) != 1 {
			t.Fatalf("claim the void: %d %v", len(void), err)
		}
		if _, err := st.CompleteMany(ctx, []outbox.Completion{{ID: void[0].ID, Token: void[0].LeaseToken, HTTPStatus: 200}}, now); err != nil {
			t.Fatal(err)
		}
		if body := confirm(); !strings.Contains(body, "1 of them are claim events that a later event of the same claim") {
			t.Errorf("the replay's confirmation does not warn of the passed claim")
		}
	})
}
