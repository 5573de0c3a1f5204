package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// role is what a token may do; a higher role may do what a lower may.
type role int

const (
	roleNone role = iota
	roleViewer
	roleAdmin
)

func (r role) String() string {
	switch r {
	case roleAdmin:
		return "admin"
	case roleViewer:
		return "viewer"
	}
	return "none"
}

// sessionCookie names the session cookie.
const sessionCookie = "ediwatch_console"

// A session is a signed cookie every replica verifies alone, with no
// session kept in memory: "v1.{role}.{expiry, unix seconds}.{random
// id}.{HMAC-SHA256 of what precedes}". The key signing a role's sessions
// is derived from that role's token, so replicas reading the same token
// files agree, and rotating a token ends the sessions signed with it
// (the other role's stay). The CSRF token is an HMAC of the id under the
// same key. Signing out records the id in the store until past its
// expiry (store.SessionRevoker), so it ends on every replica.
const sessionVersion = "v1"

// session is a verified session cookie.
type session struct {
	role    role
	id      string
	expires time.Time
}

// sessionKeys derives the key of each role's sessions from its token.
func sessionKeys(viewer, admin string) map[role][]byte {
	derive := func(token string) []byte {
		m := hmac.New(sha256.New, []byte(token))
		m.Write([]byte("ediwatch console session key"))
		return m.Sum(nil)
	}
	keys := map[role][]byte{roleViewer: derive(viewer)}
	if admin != "" {
		keys[roleAdmin] = derive(admin)
	}
	return keys
}

func (c *Console) mac(rl role, msg string) string {
	m := hmac.New(sha256.New, c.keys[rl])
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// sessionIDBytes is a session id's length in random bytes (hex in the
// cookie).
const sessionIDBytes = 16

// isSessionID reports whether id has the form newSession gives ids:
// 2*sessionIDBytes lowercase hex digits. Whoever holds a role's token can
// sign cookies of that role, so the form is checked too: a viewer must
// not have a sign-out store an id of its choosing and length.
func isSessionID(id string) bool {
	if len(id) != 2*sessionIDBytes {
		return false
	}
	for _, r := range id {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// newSession returns the cookie value of a new session of rl.
func (c *Console) newSession(rl role, now time.Time) string {
	body := strings.Join([]string{sessionVersion, rl.String(), strconv.FormatInt(now.Add(c.cfg.SessionTTL).Unix(), 10),
		randomHex(sessionIDBytes)}, ".")
	return body + "." + c.mac(rl, body)
}

// verifySession checks a cookie value's form, signature (in constant
// time) and expiry; it does not ask the store about revocation.
func (c *Console) verifySession(v string, now time.Time) (session, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 || parts[0] != sessionVersion {
		return session{}, false
	}
	var rl role
	switch parts[1] {
	case roleViewer.String():
		rl = roleViewer
	case roleAdmin.String():
		rl = roleAdmin
	}
	if _, ok := c.keys[rl]; !ok {
		return session{}, false
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return session{}, false
	}
	want := c.mac(rl, strings.Join(parts[:4], "."))
	if !hmac.Equal([]byte(parts[4]), []byte(want)) {
		return session{}, false
	}
	if !isSessionID(parts[3]) {
		return session{}, false
	}
	s := session{role: rl, id: parts[3], expires: time.Unix(exp, 0)}
	// A session never outlives its TTL, whatever a key's earlier holder
	// signed; by a little, as another replica's clock may run ahead.
	if !now.Before(s.expires) || s.expires.After(now.Add(c.cfg.SessionTTL+maxClockSkew)) {
		return session{}, false
	}
	return s, true
}

// csrfOf is a session's CSRF token.
func (c *Console) csrfOf(s session) string { return c.mac(s.role, "csrf."+s.id) }

// cookieSession returns r's session cookie's session, when one is valid
// and not signed out.
func (c *Console) cookieSession(r *http.Request) (session, bool, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false, nil
	}
	s, ok := c.verifySession(ck.Value, c.cfg.Now())
	if !ok {
		return session{}, false, nil
	}
	revoked, err := c.st.SessionRevoked(r.Context(), s.id)
	if err != nil {
		return session{}, false, err
	}
	return s, !revoked, nil
}

// limiter is one remote address's sign-in budget.
type limiter struct {
	lim  *rate.Limiter
	seen time.Time
}

// maxLimiters bounds the limiter map; idle entries are dropped first.
const maxLimiters = 10000

// who is the authenticated caller of a request.
type who struct {
	role role
	// csrf is the session's CSRF token; empty for a bearer token, which a
	// browser never sends on its own, so needs none.
	csrf string
}

type whoKey struct{}

func whoOf(r *http.Request) who {
	w, _ := r.Context().Value(whoKey{}).(who)
	return w
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}

// roleOf returns the role of token, comparing it with both tokens in
// constant time. Digests are compared, so not even a token's length
// shows in the time taken.
func (c *Console) roleOf(token string) role {
	got := sha256.Sum256([]byte(token))
	adminSum, viewerSum := sha256.Sum256([]byte(c.cfg.AdminToken)), sha256.Sum256([]byte(c.cfg.ViewerToken))
	admin := c.cfg.AdminToken != "" && subtle.ConstantTimeCompare(got[:], adminSum[:]) == 1
	viewer := subtle.ConstantTimeCompare(got[:], viewerSum[:]) == 1
	switch {
	case admin:
		return roleAdmin
	case viewer:
		return roleViewer
	}
	return roleNone
}

// remoteHost is the connection's address, never a header a client sets.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limitKey is the rate limit's key for r: its remote address, or for
// IPv6 the address's /64, which one client holds whole (rotating the low
// bits must not buy fresh attempts).
func limitKey(r *http.Request) string {
	host := remoteHost(r)
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// overflowKey is the one budget addresses share once the limiter map is
// full of addresses still spending theirs.
const overflowKey = "overflow"

// limiterOf returns key's limiter, creating it when create; c.mu is held.
// The map stays bounded: when full, idle entries go, and when none is
// idle a new address shares the overflow budget.
func (c *Console) limiterOf(key string, now time.Time, create bool) *limiter {
	if l, ok := c.limiters[key]; ok {
		return l
	}
	if !create {
		return nil
	}
	if len(c.limiters) >= maxLimiters {
		for k, v := range c.limiters {
			if v.lim.TokensAt(now) >= float64(c.cfg.SignInBurst) {
				delete(c.limiters, k)
			}
		}
		if len(c.limiters) >= maxLimiters {
			key = overflowKey
			if l, ok := c.limiters[key]; ok {
				return l
			}
		}
	}
	l := &limiter{lim: rate.NewLimiter(c.cfg.SignInRate, c.cfg.SignInBurst)}
	c.limiters[key] = l
	return l
}

// allowAttempt takes one sign-in attempt from r's remote address's
// budget, reporting whether any was left.
func (c *Console) allowAttempt(r *http.Request) bool {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.limiterOf(limitKey(r), now, true)
	l.seen = now
	return l.lim.AllowN(now, 1)
}

// allowBearer decides a bearer request against r's address's budget:
// with none left it is refused whether its token is right or wrong (else
// the limit would tell a guesser which guess was right); a wrong token
// spends one attempt, a right one nothing. Checking and spending under
// one lock keeps parallel guesses within the budget.
func (c *Console) allowBearer(r *http.Request, wrong bool) bool {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.limiterOf(limitKey(r), now, wrong)
	if l == nil {
		return true
	}
	if l.lim.TokensAt(now) < 1 {
		return false
	}
	if wrong {
		l.seen = now
		l.lim.AllowN(now, 1)
	}
	return true
}

// authenticate returns the caller of r: a bearer token when the request
// carries one (a wrong one is refused, not downgraded), else the session
// of its cookie. ok is false for a wrong bearer token; err is the store's
// when it could not say whether the session was signed out.
func (c *Console) authenticate(r *http.Request) (w who, ok bool, err error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, found := strings.CutPrefix(h, "Bearer ")
		if !found {
			return who{}, false, nil
		}
		rl := c.roleOf(strings.TrimSpace(tok))
		return who{role: rl}, rl != roleNone, nil
	}
	s, valid, err := c.cookieSession(r)
	if err != nil || !valid {
		return who{}, true, err
	}
	return who{role: s.role, csrf: c.csrfOf(s)}, true, nil
}

// auth wraps h: the caller must have at least need, and a state-changing
// request of a session must carry the session's CSRF token.
func (c *Console) auth(need role, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok, err := c.authenticate(r)
		if err != nil {
			c.fail(w, err)
			return
		}
		if r.Header.Get("Authorization") != "" && !c.allowBearer(r, !ok) {
			http.Error(w, "too many attempts; wait a minute", http.StatusTooManyRequests)
			return
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ediwatch console"`)
			http.Error(w, "wrong token", http.StatusUnauthorized)
			return
		}
		if caller.role == roleNone {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/signin", http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && caller.csrf != "" {
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(caller.csrf)) != 1 {
				http.Error(w, "missing or wrong CSRF token; reload the page", http.StatusForbidden)
				return
			}
		}
		if caller.role < need {
			http.Error(w, "this needs the admin token", http.StatusForbidden)
			return
		}
		ctx := context.WithValue(r.Context(), whoKey{}, caller)
		// A page read takes one of MaxInFlight slots, held while it reads
		// and renders, never while it writes to a slow client (render
		// gives it back first). A viewer waits for a slot at most
		// QueryTimeout, then is told to retry; one who leaves is served
		// nothing. Actions (POST) take no slot: an operator's replay or
		// sign-out never queues behind viewers.
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			wait := time.NewTimer(c.cfg.QueryTimeout)
			select {
			case c.inFlight <- struct{}{}:
				wait.Stop()
				var once sync.Once
				release := func() { once.Do(func() { <-c.inFlight }) }
				defer release()
				ctx = context.WithValue(ctx, slotKey{}, release)
			case <-wait.C:
				w.Header().Set("Retry-After", "1")
				http.Error(w, "the console is busy; retry in a moment", http.StatusServiceUnavailable)
				return
			case <-r.Context().Done():
				wait.Stop()
				return
			}
		}
		h(w, r.WithContext(ctx))
	})
}

// slotKey holds, in a page read's context, the function that gives its
// slot back.
type slotKey struct{}

// releaseSlot gives r's slot back, if it holds one (a page read about to
// write its answer).
func releaseSlot(r *http.Request) {
	if release, ok := r.Context().Value(slotKey{}).(func()); ok {
		release()
	}
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "signin", signInData{})
}

type signInData struct {
	Error string
}

// signIn checks the posted token and starts a session for it.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !c.allowAttempt(r) {
		c.render(w, r, http.StatusTooManyRequests, "signin", signInData{Error: "Too many attempts from your address; wait a minute."})
		return
	}
	rl := c.roleOf(strings.TrimSpace(r.PostFormValue("token")))
	if rl == roleNone {
		c.log.Info("console sign-in refused", zapRemote(r))
		c.render(w, r, http.StatusUnauthorized, "signin", signInData{Error: "Wrong token."})
		return
	}
	// A browser signing in again gets a new session; the one its cookie
	// held ends rather than living on beside it.
	if !c.endSession(w, r) {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.newSession(rl, c.cfg.Now()), Path: "/", HttpOnly: true,
		Secure: c.cfg.Secure, SameSite: http.SameSiteStrictMode, MaxAge: int(c.cfg.SessionTTL / time.Second)})
	c.log.Info("console sign-in", zapRemote(r), zapRole(rl))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// maxClockSkew is how far ahead another replica's clock may run: a
// session it signs in is good here at once, its expiry up to this much
// past this replica's now plus the TTL.
const maxClockSkew = 5 * time.Minute

// revokedKeptPastExpiry is how long a signed-out session's revocation
// outlives the session's expiry. Each replica judges expiry by its own
// clock, so a revocation forgotten at expiry by one replica's clock would
// let a replica whose clock lags accept the session again until its
// clock caught up.
const revokedKeptPastExpiry = time.Hour

// endSession signs out the session r's cookie holds, if any is valid,
// on every replica; false when the store failed (the answer is written).
func (c *Console) endSession(w http.ResponseWriter, r *http.Request) bool {
	s, valid, err := c.cookieSession(r)
	if err == nil && valid {
		err = c.st.RevokeSession(r.Context(), s.id, s.expires, c.cfg.Now().Add(-revokedKeptPastExpiry))
	}
	if err != nil {
		c.fail(w, err)
		return false
	}
	return true
}

// signOut ends the caller's session, in the store for every replica and
// in the browser (its cookie cleared). A viewer can sign viewer sessions
// itself (its token is their key's source), so each sign-out could store
// a revocation of its choosing: a viewer's sign-outs spend the address's
// sign-in budget, and past it the cookie is cleared but nothing is
// stored. Only an admin can sign admin sessions, so an admin's sign-out
// is always stored: a guesser sharing the address (a proxy, a NAT) must
// not leave a copy of the admin's cookie good.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if (whoOf(r).role == roleAdmin || c.allowAttempt(r)) && !c.endSession(w, r) {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: c.cfg.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}
