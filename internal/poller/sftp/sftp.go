// Package sftp is the SFTP source (github.com/pkg/sftp over
// golang.org/x/crypto/ssh). Host keys are verified against a known_hosts
// file: an unknown or changed key is refused with the host and the
// fingerprint it offered. One connection is kept and reused across polls,
// kept alive, and re-established with exponential backoff and jitter after
// a failure.
package sftp

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ediwatch/ediwatch/internal/backoff"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/secretfile"
)

// Config is how to reach one server. Secrets are read from files.
type Config struct {
	Address        string // host:port
	User           string
	PrivateKeyFile string
	PassphraseFile string
	PasswordFile   string
	KnownHostsFile string
	// Timeout bounds connecting and each keepalive round trip (default
	// 30s); and while a call waits on the SFTP server, the time the
	// server may go without sending anything: past it the connection is
	// dropped and the calls on it fail (a stalled download, listing or
	// rename does not hold a poll for good).
	Timeout time.Duration
	// Keepalive is the interval of keepalive requests (default 30s).
	Keepalive time.Duration
	// BackoffBase and BackoffMax shape reconnect backoff (default 1s, 5m).
	BackoffBase, BackoffMax time.Duration
}

// Source is an SFTP drop. It is safe for concurrent use.
type Source struct {
	cfg      Config
	auth     ssh.AuthMethod
	hostKeys ssh.HostKeyCallback
	algos    []string

	mu       sync.Mutex
	ssh      *ssh.Client
	client   *sftp.Client
	watch    *watch // of the current connection
	failures int
	retryAt  time.Time
	stop     chan struct{}
}

var _ poller.Source = (*Source)(nil)

// New checks the configuration and reads the credentials and known hosts.
// It does not connect: the first call does.
func New(cfg Config) (*Source, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = 30 * time.Second
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 5 * time.Minute
	}
	s := &Source{cfg: cfg}
	switch {
	case cfg.PrivateKeyFile != "":
		pem, err := secretfile.Read(cfg.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("private_key_file: %w", err)
		}
		var signer ssh.Signer
		if cfg.PassphraseFile != "" {
			pass, err := secretfile.Read(cfg.PassphraseFile)
			if err != nil {
				return nil, fmt.Errorf("passphrase_file: %w", err)
			}
			signer, err = ssh.ParsePrivateKeyWithPassphrase(pem, []byte(strings.TrimRight(string(pass), "\r\n")))
			if err != nil {
				return nil, fmt.Errorf("private key %s: %w", cfg.PrivateKeyFile, err)
			}
		} else if signer, err = ssh.ParsePrivateKey(pem); err != nil {
			return nil, fmt.Errorf("private key %s: %w", cfg.PrivateKeyFile, err)
		}
		s.auth = ssh.PublicKeys(signer)
	case cfg.PasswordFile != "":
		pass, err := secretfile.Read(cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("password_file: %w", err)
		}
		s.auth = ssh.Password(strings.TrimRight(string(pass), "\r\n"))
	default:
		return nil, errors.New("sftp: a private key file or a password file is required")
	}
	kh, err := knownhosts.New(cfg.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("known hosts: %w", err)
	}
	s.hostKeys = verify(kh, cfg.KnownHostsFile)
	s.algos = knownAlgorithms(kh, cfg.Address)
	return s, nil
}

// verify wraps a known_hosts callback so a refusal names the host and the
// key it offered.
func verify(kh ssh.HostKeyCallback, file string) ssh.HostKeyCallback {
	return func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := kh(host, remote, key)
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) == 0 {
				return fmt.Errorf("host key of %s is unknown: it offered %s %s; refusing to connect (add it to %s once verified out of band)",
					host, key.Type(), ssh.FingerprintSHA256(key), file)
			}
			return fmt.Errorf("host key of %s does not match %s: it offered %s %s; refusing to connect",
				host, file, key.Type(), ssh.FingerprintSHA256(key))
		}
		return err
	}
}

// knownAlgorithms returns the host key algorithms known_hosts holds for
// address, so the server is asked for a key type that can be verified.
func knownAlgorithms(kh ssh.HostKeyCallback, address string) []string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil
	}
	probe, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil
	}
	tcp, err := net.ResolveTCPAddr("tcp", address)
	if err != nil {
		tcp = &net.TCPAddr{}
	}
	var ke *knownhosts.KeyError
	if !errors.As(kh(address, tcp, probe), &ke) {
		return nil
	}
	var algos []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algos = append(algos, t)
		}
	}
	return algos
}

// watch notices an SFTP server that stops answering while calls wait on
// it. SSH keepalives cannot: sshd answers them itself, also while the SFTP
// server behind it (a process of its own) is stuck.
type watch struct {
	busy    atomic.Int64 // calls waiting on the server
	last    atomic.Int64 // unix ns: bytes last received, or the busy spell began
	stalled atomic.Bool  // the watchdog dropped the connection
}

// begin marks a call waiting on the server; end, its return.
func (w *watch) begin() {
	if w.busy.Add(1) == 1 {
		w.last.Store(time.Now().UnixNano())
	}
}

func (w *watch) end() { w.busy.Add(-1) }

// received counts the SFTP channel's bytes as progress.
type received struct {
	r io.Reader
	w *watch
}

func (r received) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		r.w.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// paused is a download's writer: the time spent writing (the spool's
// disk) is not time waiting on the server.
type paused struct {
	w     io.Writer
	watch *watch
}

func (p paused) Write(b []byte) (int, error) {
	p.watch.end()
	defer p.watch.begin()
	p.watch.last.Store(time.Now().UnixNano())
	return p.w.Write(b)
}

// watchdog drops the connection sc when a call has waited on the server
// for Timeout with nothing received.
func (s *Source) watchdog(sc *ssh.Client, w *watch, stop chan struct{}) {
	t := time.NewTicker(max(s.cfg.Timeout/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if w.busy.Load() > 0 && time.Since(time.Unix(0, w.last.Load())) > s.cfg.Timeout {
			w.stalled.Store(true)
			s.drop(sc)
			return
		}
	}
}

// conn returns the live connection (the SFTP client, the SSH connection
// under it and its watch), connecting when there is none and the
// reconnect backoff allows.
func (s *Source) conn(ctx context.Context) (*sftp.Client, *ssh.Client, *watch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, s.ssh, s.watch, nil
	}
	if wait := time.Until(s.retryAt); wait > 0 {
		return nil, nil, nil, fmt.Errorf("sftp %s: reconnecting in %s after %d failures", s.cfg.Address, wait.Round(time.Millisecond), s.failures)
	}
	client, err := s.dial(ctx)
	if err != nil {
		s.failures++
		s.retryAt = time.Now().Add(backoff.Full(s.cfg.BackoffBase, s.cfg.BackoffMax, s.failures))
		return nil, nil, nil, err
	}
	s.failures, s.retryAt = 0, time.Time{}
	return client, s.ssh, s.watch, nil
}

func (s *Source) dial(ctx context.Context) (*sftp.Client, error) {
	d := net.Dialer{Timeout: s.cfg.Timeout}
	nc, err := d.DialContext(ctx, "tcp", s.cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("sftp %s: %w", s.cfg.Address, err)
	}
	// The deadline bounds the whole setup, the SFTP session's start
	// included (a server may finish the SSH handshake and never answer
	// the SFTP version); a context done meanwhile cuts it short. The
	// connection's lock is held meanwhile, by every other caller too.
	nc.SetDeadline(time.Now().Add(s.cfg.Timeout))
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	cc, chans, reqs, err := ssh.NewClientConn(nc, s.cfg.Address, &ssh.ClientConfig{
		User: s.cfg.User, Auth: []ssh.AuthMethod{s.auth}, HostKeyCallback: s.hostKeys,
		HostKeyAlgorithms: s.algos, Timeout: s.cfg.Timeout,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("sftp %s@%s: %w", s.cfg.User, s.cfg.Address, err)
	}
	sc := ssh.NewClient(cc, chans, reqs)
	w := &watch{}
	client, err := newClient(sc, w)
	if err != nil {
		sc.Close()
		return nil, fmt.Errorf("sftp %s: start sftp: %w", s.cfg.Address, err)
	}
	if !stop() || nc.SetDeadline(time.Time{}) != nil {
		client.Close()
		sc.Close()
		return nil, fmt.Errorf("sftp %s: %w", s.cfg.Address, context.Cause(ctx))
	}
	s.ssh, s.client, s.watch = sc, client, w
	s.stop = make(chan struct{})
	go s.keepalive(sc, s.stop)
	go s.watchdog(sc, w, s.stop)
	return client, nil
}

// newClient starts the SFTP session on sc as sftp.NewClient does, with
// the bytes it receives counted by w.
func newClient(sc *ssh.Client, w *watch) (*sftp.Client, error) {
	session, err := sc.NewSession()
	if err != nil {
		return nil, err
	}
	pw, err := session.StdinPipe()
	if err != nil {
		return nil, err
	}
	pr, err := session.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := session.RequestSubsystem("sftp"); err != nil {
		return nil, err
	}
	return sftp.NewClientPipe(received{r: pr, w: w}, pw, sftp.UseConcurrentReads(true), sftp.MaxConcurrentRequestsPerFile(64))
}

// keepalive sends keepalive requests; a request unanswered within the
// timeout closes the connection, which fails the calls in flight.
func (s *Source) keepalive(sc *ssh.Client, stop chan struct{}) {
	t := time.NewTicker(s.cfg.Keepalive)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		done := make(chan error, 1)
		go func() {
			_, _, err := sc.SendRequest("keepalive@openssh.com", true, nil)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				continue
			}
		case <-time.After(s.cfg.Timeout):
		case <-stop:
			return
		}
		s.drop(sc)
		return
	}
}

// drop closes the connection sc if it is still the current one, so the
// next call reconnects.
func (s *Source) drop(sc *ssh.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ssh != sc || sc == nil {
		return
	}
	s.closeLocked()
}

func (s *Source) closeLocked() {
	if s.stop != nil {
		close(s.stop)
		s.stop = nil
	}
	// The SSH connection first: the SFTP client's Close waits for its
	// reader, which a server that stopped answering never ends.
	if s.ssh != nil {
		s.ssh.Close()
	}
	if s.client != nil {
		s.client.Close()
	}
	s.client, s.ssh, s.watch = nil, nil, nil
}

// failed drops the connection sc (watched by w) when err, from a call on
// it, shows it is broken. A newer connection (another caller reconnected
// meanwhile) stays.
func (s *Source) failed(sc *ssh.Client, w *watch, err error) error {
	if err == nil {
		return nil
	}
	if w.stalled.Load() {
		return fmt.Errorf("sftp %s: no answer from the server within %s; connection dropped: %w", s.cfg.Address, s.cfg.Timeout, err)
	}
	// pkg/sftp reports a lost connection as an SFTP status; every other
	// status, and not-found, exists and permission errors, are answers
	// from a working server.
	lost := errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.Is(err, sftp.ErrSSHFxNoConnection)
	var se *sftp.StatusError
	if !lost && (errors.As(err, &se) || errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrExist) ||
		errors.Is(err, os.ErrPermission)) {
		return err
	}
	s.drop(sc)
	return err
}

// List implements poller.Source.
func (s *Source) List(ctx context.Context, dir string) ([]poller.Entry, error) {
	c, sc, w, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	w.begin()
	infos, err := c.ReadDirContext(ctx, dir)
	w.end()
	if err != nil {
		return nil, s.failed(sc, w, err)
	}
	out := make([]poller.Entry, 0, len(infos))
	for _, fi := range infos {
		if kind := poller.SkipKind(fi.Mode()); kind != "" {
			out = append(out, poller.Entry{Name: fi.Name(), Path: path.Join(dir, fi.Name()), Skip: kind})
		} else {
			out = append(out, poller.Entry{Name: fi.Name(), Path: path.Join(dir, fi.Name()), Size: fi.Size(), MTime: fi.ModTime()})
		}
	}
	return out, nil
}

// abortOn drops the current connection when ctx is done before stop is
// called. pkg/sftp's calls take no context, and a stalled server would
// hold them (and a shutdown) for as long as it stalls; dropping the
// connection fails every call on it at once, and the next call
// reconnects.
func (s *Source) abortOn(ctx context.Context, sc *ssh.Client) (stop func() bool) {
	return context.AfterFunc(ctx, func() { s.drop(sc) })
}

// do runs fn on the connection, aborted when ctx is done or the server
// stops answering.
func (s *Source) do(ctx context.Context, fn func(c *sftp.Client, sc *ssh.Client, w *watch) error) error {
	c, sc, w, err := s.conn(ctx)
	if err != nil {
		return err
	}
	stop := s.abortOn(ctx, sc)
	w.begin()
	err = fn(c, sc, w)
	w.end()
	stop()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return s.failed(sc, w, err)
}

// Stat implements poller.Source.
func (s *Source) Stat(ctx context.Context, p string) (poller.Entry, error) {
	var e poller.Entry
	err := s.do(ctx, func(c *sftp.Client, _ *ssh.Client, _ *watch) error {
		fi, err := c.Lstat(p)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		e = poller.Entry{Name: fi.Name(), Path: p, Size: fi.Size(), MTime: fi.ModTime()}
		return nil
	})
	return e, err
}

// Open implements poller.Source. The file's reads honour ctx.
func (s *Source) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	var f *sftp.File
	var conn *ssh.Client
	var watched *watch
	err := s.do(ctx, func(c *sftp.Client, sc *ssh.Client, w *watch) (err error) {
		conn, watched = sc, w
		f, err = c.Open(p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &file{File: f, s: s, sc: conn, w: watched, ctx: ctx}, nil
}

// file drops the connection when a read fails below the SFTP layer, ctx
// is done while a read waits, or the server stops answering.
type file struct {
	*sftp.File
	s   *Source
	sc  *ssh.Client // the connection the file is open on
	w   *watch
	ctx context.Context
}

func (f *file) Read(b []byte) (int, error) {
	stop := f.s.abortOn(f.ctx, f.sc)
	f.w.begin()
	n, err := f.File.Read(b)
	f.w.end()
	stop()
	if err != nil && err != io.EOF {
		if f.ctx.Err() != nil {
			return n, f.ctx.Err()
		}
		err = f.s.failed(f.sc, f.w, err)
	}
	return n, err
}

func (f *file) WriteTo(w io.Writer) (int64, error) {
	stop := f.s.abortOn(f.ctx, f.sc)
	f.w.begin()
	n, err := f.File.WriteTo(paused{w: w, watch: f.w})
	f.w.end()
	stop()
	if err != nil && f.ctx.Err() != nil {
		return n, f.ctx.Err()
	}
	return n, f.s.failed(f.sc, f.w, err)
}

// Close closes the file; a server that does not answer the close is a
// stall like any other.
func (f *file) Close() error {
	f.w.begin()
	defer f.w.end()
	return f.File.Close()
}

// Remove implements poller.Source.
func (s *Source) Remove(ctx context.Context, p string) error {
	return s.do(ctx, func(c *sftp.Client, _ *ssh.Client, _ *watch) error { return c.Remove(p) })
}

// Rename implements poller.Source. SFTP's rename (version 3, as OpenSSH
// serves it) fails when the target exists; a stat first makes the error
// os.ErrExist on every server.
func (s *Source) Rename(ctx context.Context, from, to string) error {
	return s.do(ctx, func(c *sftp.Client, _ *ssh.Client, _ *watch) error {
		if _, err := c.Lstat(to); err == nil {
			return fmt.Errorf("rename %s: %w", to, os.ErrExist)
		}
		return c.Rename(from, to)
	})
}

// MkdirAll implements poller.Source.
func (s *Source) MkdirAll(ctx context.Context, dir string) error {
	return s.do(ctx, func(c *sftp.Client, _ *ssh.Client, _ *watch) error { return c.MkdirAll(dir) })
}

// Close implements poller.Source.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	return nil
}

// Do runs fn on the shared connection (connecting first when there is
// none), aborted when ctx is done; an error that shows the connection
// broken drops it, so the next call reconnects. The SFTP sink writes
// through it.
func (s *Source) Do(ctx context.Context, fn func(c *sftp.Client) error) error {
	return s.do(ctx, func(c *sftp.Client, _ *ssh.Client, _ *watch) error { return fn(c) })
}
