package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/store"
)

// consoleServer is the operator console's server and listener.
type consoleServer struct {
	srv       *http.Server
	ln        net.Listener
	cert, key string
}

// minTokenLength is the shortest console token newConsole takes without a
// warning: 32 characters, 128 bits and more of a random hex or base64
// token.
const minTokenLength = 32

// newConsole prepares the operator console when console.listen is set:
// it reads the tokens and opens the listener; nil when the console is off.
// It refuses plain HTTP on an address other than loopback unless
// console.allow_insecure is set.
func newConsole(cfg config.Config, st store.Store, breakers func() map[string]string, log *zap.Logger) (*consoleServer, error) {
	cc := cfg.Console
	if !cc.Enabled() {
		return nil, nil
	}
	if err := console.CheckListen(cc.Listen, cc.TLS(), cc.AllowInsecure); err != nil {
		return nil, err
	}
	viewer, err := console.ReadToken(cc.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("console.token_file: %w", err)
	}
	var admin string
	if cc.AdminTokenFile != "" {
		if admin, err = console.ReadToken(cc.AdminTokenFile); err != nil {
			return nil, fmt.Errorf("console.admin_token_file: %w", err)
		}
	}
	for _, t := range []struct{ setting, token string }{{"console.token_file", viewer}, {"console.admin_token_file", admin}} {
		if t.token != "" && len(t.token) < minTokenLength {
			// Not refused (a deployment would stop at an upgrade): a
			// short token is guessed offline from any cookie it signed.
			log.Warn("the console token is short: use at least 32 random characters (openssl rand -hex 32)",
				zap.String("setting", t.setting), zap.Int("characters", len(t.token)))
		}
	}
	var sources, sinks []string
	intervals := map[string]time.Duration{}
	for _, s := range cfg.Sources {
		sources = append(sources, s.Name)
		intervals[s.Name] = s.PollInterval.D()
	}
	for name := range cfg.Sinks {
		sinks = append(sinks, name)
	}
	slices.Sort(sinks)
	h, err := console.New(console.Config{ViewerToken: viewer, AdminToken: admin, Sources: sources, Sinks: sinks,
		PollIntervals: intervals, Breakers: breakers, Secure: cc.TLS(), QueryTimeout: cfg.Store.ConsoleTimeout.D()},
		st, log.Named("console"))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cc.Listen)
	if err != nil {
		return nil, fmt.Errorf("console.listen: %w", err)
	}
	// The address bound, whatever a name resolved to, must pass too.
	if err := console.CheckListen(ln.Addr().String(), cc.TLS(), cc.AllowInsecure); err != nil {
		ln.Close()
		return nil, err
	}
	return &consoleServer{srv: newHTTPServer(h), ln: ln, cert: cc.TLSCertFile, key: cc.TLSKeyFile}, nil
}

// run serves the console in g until gctx ends, then shuts it down within
// shutdownGrace.
func (cs *consoleServer) run(gctx context.Context, g *errgroup.Group) {
	g.Go(func() error {
		var err error
		if cs.cert != "" {
			err = cs.srv.ServeTLS(cs.ln, cs.cert, cs.key)
		} else {
			err = cs.srv.Serve(cs.ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("console: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		return cs.srv.Shutdown(sctx)
	})
}
