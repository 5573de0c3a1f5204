package outbox_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// failoverProxy forwards TCP connections to PostgreSQL. strand makes the
// connections open at that moment a black hole, as a failover leaves the
// connections to a primary that is gone: nothing more passes either way,
// and nothing closes them. Connections made after it pass (the new
// primary).
type failoverProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*proxied
	closed chan struct{}
}

type proxied struct {
	stranded atomic.Bool
	a, b     net.Conn
}

func newFailoverProxy(t *testing.T, target string) *failoverProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &failoverProxy{ln: ln, target: target, closed: make(chan struct{})}
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			c := &proxied{a: a, b: b}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			go p.pipe(c, a, b)
			go p.pipe(c, b, a)
		}
	}()
	t.Cleanup(p.close)
	return p
}

// close ends every connection, stranded or not.
func (p *failoverProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		return
	default:
	}
	close(p.closed)
	p.ln.Close()
	for _, c := range p.conns {
		c.a.Close()
		c.b.Close()
	}
}

func (p *failoverProxy) pipe(c *proxied, from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if c.stranded.Load() {
			<-p.closed // swallowed: the peer is gone
			return
		}
		if n > 0 {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			to.Close()
			return
		}
	}
}

func (p *failoverProxy) strand() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.stranded.Store(true)
	}
}

// throughFailoverProxy returns a new test schema on PostgreSQL twice: as
// direct, connected straight to the server, and as st, opened with opts
// through a new failoverProxy.
func throughFailoverProxy(t *testing.T, opts postgres.Options) (direct, st *postgres.Store, proxy *failoverProxy) {
	t.Helper()
	direct = pgtest.New(t, postgres.Options{})
	if err := direct.Pool().QueryRow(context.Background(), "SELECT current_schema()").Scan(&opts.Schema); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy = newFailoverProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	if st, err = postgres.Open(context.Background(), u.String(), opts); err != nil {
		t.Fatal(err)
	}
	return direct, st, proxy
}

// TestRelayOutlivesConnectionsStrandedByAFailover: while a batch is in
// flight, PostgreSQL fails over and every connection the relay holds
// becomes a black hole (no reset, no answer), as connections to a primary
// that vanished do; new connections reach the new primary. The relay's
// store calls must not wait on the stranded connections forever: it goes
// on delivering through new ones, every effect ends delivered, and it
// stops when asked.
func TestRelayOutlivesConnectionsStrandedByAFailover(t *testing.T) {
	direct, st, proxy := throughFailoverProxy(t, postgres.Options{})
	const payments = 6
	ingestPayments(t, direct, payments)
	var once sync.Once
	rc := counting(t, func(*http.Request) { once.Do(proxy.strand) })
	s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Timeout: 5 * time.Second})
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 2, Lease: 2 * time.Second, Idle: 20 * time.Millisecond}, st,
		map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { r.Run(ctx); close(stopped) }()
	delivered := func() int {
		c, _ := direct.Counts(context.Background())
		return c.Outbox[outbox.StatusDelivered]
	}
	for end := time.Now().Add(2 * time.Minute); delivered() < payments+1 && time.Now().Before(end); { // a hang guard
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(2 * time.Minute): // a hang guard
		t.Error("the relay did not stop: a store call waits on a stranded connection")
		proxy.close() // the stranded calls fail now
		<-stopped
	}
	if n := delivered(); n != payments+1 {
		t.Errorf("%d of %d effects recorded delivered", n, payments+1)
	}
	proxy.close()
	st.Close()
}

// TestListenOutlivesAConnectionStrandedByAFailover: the connection that
// LISTENs for ingests is stranded by a failover (nothing answers, nothing
// closes it). Listen finds it dead, listens again on a new connection
// (and wakes the relay, as after any reconnect), and stops when asked.
func TestListenOutlivesAConnectionStrandedByAFailover(t *testing.T) {
	_, st, proxy := throughFailoverProxy(t, postgres.Options{ListenCheck: 200 * time.Millisecond})
	wakes := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		st.Listen(ctx, func() { wakes <- struct{}{} }, nil)
		close(stopped)
	}()
	wait := func(what string) bool {
		select {
		case <-wakes:
			return true
		case <-time.After(time.Minute): // a hang guard
			t.Errorf("no wake-up %s", what)
			return false
		}
	}
	if wait("when listening starts") {
		proxy.strand()
		for len(wakes) > 0 {
			<-wakes
		}
		wait("after the listening connection was stranded")
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(time.Minute): // a hang guard
		t.Error("Listen did not stop: it waits on a stranded connection")
		proxy.close()
		<-stopped
	}
	proxy.close()
	st.Close()
}
