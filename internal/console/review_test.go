package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
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
	max atomic.Int64
}

func (l *limitRecorder) ListDead(ctx context.Context, f outbox.DeadFilter, limit int) ([]outbox.Row, error) {
	if int64(limit) > l.max.Load() {
		l.max.Store(int64(limit))
	}
	return l.Store.ListDead(ctx, f, limit)
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
