package console_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// rowOfKind returns the first of rows of kind.
func rowOfKind(t *testing.T, rows []outbox.Row, kind string) outbox.Row {
	t.Helper()
	for _, r := range rows {
		if r.Kind == kind {
			return r
		}
	}
	t.Fatalf("no dead %s row", kind)
	return outbox.Row{}
}

func status(t *testing.T, st store.Store, id int64) string {
	t.Helper()
	r, err := st.GetOutbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// TestReplayFromThePageIsDeliveredByTheReceiver: an admin signs in,
// selects a dead row on /dlq, confirms the replay, and a relay delivers
// it to the receiver that refused it before; the other rows stay dead.
func TestReplayFromThePageIsDeliveredByTheReceiver(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		rc, rows := deadLetters(t, st)
		pay := rowOfKind(t, rows, "payment.posted")
		srv := serve(t, st, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		resp, body := b.do("GET", "/dlq?sink=ledger", nil, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="ids" value="`+strconv.FormatInt(pay.ID, 10)+`"`) {
			t.Fatalf("dlq page: %s, no row %d", resp.Status, pay.ID)
		}
		id := strconv.FormatInt(pay.ID, 10)
		form := url.Values{"csrf": {b.csrf}, "ids": {id}, "sink": {"ledger"}}
		resp, body = b.do("POST", "/dlq/replay", form, map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"})
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Confirm: replay 1 dead rows") {
			t.Fatalf("confirmation: %s\n%s", resp.Status, body)
		}
		if got := status(t, st, pay.ID); got != outbox.StatusDead {
			t.Fatalf("row %s before the confirmation", got)
		}
		form.Set("confirm", "yes")
		resp, _ = b.do("POST", "/dlq/replay", form, map[string]string{"Origin": srv.URL})
		if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "n=1") {
			t.Fatalf("replay: %s to %q", resp.Status, resp.Header.Get("Location"))
		}
		if _, body := b.do("GET", resp.Header.Get("Location"), nil, nil); !strings.Contains(body, "1 rows queued for delivery again") {
			t.Errorf("no outcome on the page")
		}
		rc.accept.Store(true)
		relayUntil(t, st, rc, func() bool { return status(t, st, pay.ID) == outbox.StatusDelivered })
		if rc.delivered.Load() != 1 {
			t.Errorf("receiver got %d deliveries, want 1", rc.delivered.Load())
		}
		for _, r := range rows {
			if r.ID != pay.ID && status(t, st, r.ID) != outbox.StatusDead {
				t.Errorf("row %d (%s) no longer dead", r.ID, r.Kind)
			}
		}
		// The row's page shows its attempt history: the refused attempt and
		// the delivery.
		_, body = b.do("GET", "/dlq/"+id, nil, nil)
		if !strings.Contains(body, "<td>4xx</td>") || !strings.Contains(body, "<td>2xx</td>") {
			t.Errorf("row page lacks its attempts:\n%s", body)
		}
	})
}

// TestAllMatchingActsOnTheFilterAndBearerActsAtOnce: all=true with a
// filter discards every matching row and no other; a bearer caller needs
// no confirmation.
func TestAllMatchingActsOnTheFilterAndBearerActsAtOnce(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		_, rows := deadLetters(t, st)
		srv := serve(t, st, nil)
		resp, body := bearer(t, srv, "POST", "/dlq/discard", adminToken, url.Values{"all": {"true"}, "kind": {"claim.received"}})
		claims := 0
		for _, r := range rows {
			if r.Kind == "claim.received" {
				claims++
			}
		}
		if resp.StatusCode != http.StatusOK || body != strconv.Itoa(claims)+" rows discarded\n" {
			t.Fatalf("discard: %s %q, want %d rows", resp.Status, body, claims)
		}
		for _, r := range rows {
			want := outbox.StatusDead
			if r.Kind == "claim.received" {
				want = outbox.StatusDiscarded
			}
			if got := status(t, st, r.ID); got != want {
				t.Errorf("row %d (%s): %s, want %s", r.ID, r.Kind, got, want)
			}
		}
		if resp, _ := bearer(t, srv, "POST", "/dlq/replay", adminToken, url.Values{"sink": {"ledger"}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("neither ids nor all: %s", resp.Status)
		}
	})
}

// TestViewerReplayIsRefused: a viewer, by bearer token or signed in with
// a valid CSRF token, may not replay, discard or disable; nothing changes.
func TestViewerReplayIsRefused(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		_, rows := deadLetters(t, st)
		srv := serve(t, st, nil)
		id := strconv.FormatInt(rows[0].ID, 10)
		for _, p := range []string{"/dlq/replay", "/dlq/discard", "/sinks/ledger/disable"} {
			if resp, _ := bearer(t, srv, "POST", p, viewerToken, url.Values{"ids": {id}, "confirm": {"yes"}}); resp.StatusCode != http.StatusForbidden {
				t.Errorf("viewer bearer %s: %s", p, resp.Status)
			}
		}
		b := newBrowser(t, srv)
		b.signIn(viewerToken)
		if resp, _ := b.do("POST", "/dlq/replay", url.Values{"csrf": {b.csrf}, "ids": {id}, "confirm": {"yes"}}, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("viewer session replay: %s", resp.Status)
		}
		if _, body := b.do("GET", "/dlq", nil, nil); strings.Contains(body, "Replay selected") || strings.Contains(body, `name="ids"`) {
			t.Error("a viewer is offered the actions")
		}
		if got := status(t, st, rows[0].ID); got != outbox.StatusDead {
			t.Errorf("row %s after a viewer's replay", got)
		}
		if states, _ := st.SinkStates(context.Background()); len(states) != 0 {
			t.Errorf("sink states after a viewer's disable: %+v", states)
		}
	})
}

// TestCrossSiteOrTokenlessFormPostIsRefused: a signed-in admin's browser
// posting from another site (Origin, Sec-Fetch-Site), or without the
// session's CSRF token, or with another, changes nothing.
func TestCrossSiteOrTokenlessFormPostIsRefused(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		_, rows := deadLetters(t, st)
		srv := serve(t, st, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		id := strconv.FormatInt(rows[0].ID, 10)
		for _, tc := range []struct {
			name   string
			csrf   string
			header map[string]string
		}{
			{"cross-site origin", b.csrf, map[string]string{"Origin": "https://evil.example"}},
			{"null origin", b.csrf, map[string]string{"Origin": "null"}},
			{"cross-site origin, same-origin claimed by none", b.csrf, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""}},
			{"sec-fetch-site cross-site", b.csrf, map[string]string{"Sec-Fetch-Site": "cross-site"}},
			{"sec-fetch-site same-site", b.csrf, map[string]string{"Sec-Fetch-Site": "same-site"}},
			{"no csrf", "", nil},
			{"wrong csrf", strings.Repeat("0", len(b.csrf)), nil},
		} {
			form := url.Values{"ids": {id}, "confirm": {"yes"}}
			if tc.csrf != "" {
				form.Set("csrf", tc.csrf)
			}
			for _, p := range []string{"/dlq/replay", "/dlq/discard", "/sinks/ledger/disable"} {
				if resp, _ := b.do("POST", p, form, tc.header); resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s %s: %s", tc.name, p, resp.Status)
				}
			}
		}
		if resp, _ := b.do("POST", "/signin", url.Values{"token": {adminToken}}, map[string]string{"Origin": "https://evil.example"}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site sign-in: %s", resp.Status)
		}
		if got := status(t, st, rows[0].ID); got != outbox.StatusDead {
			t.Errorf("row %s after refused posts", got)
		}
		if states, _ := st.SinkStates(context.Background()); len(states) != 0 {
			t.Errorf("sink states after refused posts: %+v", states)
		}
	})
}

// TestSameOriginPostWithNullOriginIsAccepted: a browser posting a form of
// the console's own page sends "Origin: null" (the pages' Referrer-Policy
// is no-referrer) with Sec-Fetch-Site: same-origin; that is not cross-site.
func TestSameOriginPostWithNullOriginIsAccepted(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		_, rows := deadLetters(t, st)
		srv := serve(t, st, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		form := url.Values{"csrf": {b.csrf}, "ids": {strconv.FormatInt(rows[0].ID, 10)}, "confirm": {"yes"}}
		resp, _ := b.do("POST", "/dlq/discard", form, map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("same-origin post with a null origin: %s", resp.Status)
		}
		if got := status(t, st, rows[0].ID); got != outbox.StatusDiscarded {
			t.Errorf("row %s", got)
		}
	})
}

// TestAdminDisablesAndEnablesASinkFromThePage: the sinks page's forms
// disable a sink with a reason and enable it again; an unknown sink is
// 404.
func TestAdminDisablesAndEnablesASinkFromThePage(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		if _, body := b.do("GET", "/sinks", nil, nil); !strings.Contains(body, `action="/sinks/ledger/disable"`) {
			t.Fatalf("no disable form:\n%s", body)
		}
		resp, _ := b.do("POST", "/sinks/ledger/disable", url.Values{"csrf": {b.csrf}, "reason": {"ERP maintenance"}}, nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("disable: %s", resp.Status)
		}
		_, body := b.do("GET", "/sinks", nil, nil)
		if !strings.Contains(body, "ERP maintenance") || !strings.Contains(body, `action="/sinks/ledger/enable"`) {
			t.Errorf("sinks page after the disable:\n%s", body)
		}
		states, _ := st.SinkStates(context.Background())
		if len(states) != 1 || !states[0].Disabled || states[0].By != "console admin" {
			t.Errorf("states %+v", states)
		}
		if resp, _ := b.do("POST", "/sinks/ledger/enable", url.Values{"csrf": {b.csrf}}, nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("enable: %s", resp.Status)
		}
		if states, _ := st.SinkStates(context.Background()); len(states) != 1 || states[0].Disabled {
			t.Errorf("states after enable %+v", states)
		}
		if resp, _ := b.do("POST", "/sinks/nosuch/disable", url.Values{"csrf": {b.csrf}}, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("unknown sink: %s", resp.Status)
		}
	})
}

// TestNoPatientDataOnAnyPage renders every page over a store holding 835
// and 837 files whose rows are dead, their receiver having echoed the
// payloads, and finds no name, member id, patient control number, claim
// amount or claim effect key in clear in any of them.
func TestNoPatientDataOnAnyPage(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		_, rows := deadLetters(t, st)
		if _, err := st.DisableSink(context.Background(), "acks", "gone", "relay", time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
		// The overview's poll status and every sink's recent attempts (the
		// receiver's 400s) are on the pages too.
		if err := st.RecordPoll(context.Background(), "test", "/outbound/835", "replica-1", inbox.Fence{}, time.Now(),
			"list: connection reset by peer"); err != nil {
			t.Fatal(err)
		}
		srv := serve(t, st, nil)
		b := newBrowser(t, srv)
		b.signIn(adminToken)
		pages := map[string]string{}
		for _, p := range []string{"/", "/dlq", "/sinks", "/dlq?kind=claim.received", "/signin", "/reconcile", "/reconcile?since=7d"} {
			_, pages[p] = b.do("GET", p, nil, nil)
		}
		for _, r := range rows {
			p := "/dlq/" + strconv.FormatInt(r.ID, 10)
			_, pages[p] = b.do("GET", p, nil, nil)
		}
		files, err := st.ListFiles(context.Background(), inbox.FileFilter{}, 100)
		if err != nil || len(files) != 2 {
			t.Fatalf("files %v %v", files, err)
		}
		for _, p := range []string{"/files", "/files?source=test"} {
			_, pages[p] = b.do("GET", p, nil, nil)
		}
		for _, f := range files {
			p := "/files/" + f.CorrelationID
			_, pages[p] = b.do("GET", p, nil, nil)
		}
		_, pages["confirm all"] = b.do("POST", "/dlq/replay", url.Values{"csrf": {b.csrf}, "all": {"true"}}, nil)
		forbidden := []string{"PATIENT", "MBR0", "ZQXPCN", "PCN1-", "150.00"}
		digests := 0
		for _, r := range rows {
			if r.Kind == "claim.received" {
				forbidden = append(forbidden, r.EffectKey)
				digests++
			}
			if !strings.Contains(pages["/dlq"], sink.LogKey(r.Kind, r.EffectKey)) {
				t.Errorf("/dlq lacks row %d's key %s", r.ID, sink.LogKey(r.Kind, r.EffectKey))
			}
		}
		if digests == 0 {
			t.Fatal("no claim rows: the test proves nothing")
		}
		for p, want := range map[string][]string{"/": {"last: list: connection reset by peer", "0.0%"},
			"/sinks": {"0.0%"}, "/files": {"1 processed"}} {
			for _, w := range want {
				if !strings.Contains(pages[p], w) {
					t.Errorf("%s lacks %q: the new fields are not covered", p, w)
				}
			}
		}
		for p, body := range pages {
			if len(body) < 200 {
				t.Errorf("%s: page too short to prove anything: %q", p, body)
			}
			for _, f := range forbidden {
				if strings.Contains(body, f) {
					t.Errorf("%s shows %q", p, f)
				}
			}
		}
	})
}

// TestReadTokenTrimsAndRefusesEmpty: a token file's surrounding
// whitespace is not part of the token; an empty file is refused, and the
// error names the file, not its content.
func TestReadTokenTrimsAndRefusesEmpty(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	os.WriteFile(p, []byte("  s3cret-token\n\n"), 0o600)
	if tok, err := console.ReadToken(p); err != nil || tok != "s3cret-token" {
		t.Errorf("%q %v", tok, err)
	}
	os.WriteFile(p, []byte(" \n"), 0o600)
	if _, err := console.ReadToken(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("empty token file: %v", err)
	}
}
