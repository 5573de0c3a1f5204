package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/journal"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/poller/sftp"
	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/secretfile"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/sink/sftpsink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
)

// shutdownGrace bounds how long a stop waits for in-flight work.
const shutdownGrace = 30 * time.Second

// foldDaysPerPass bounds the days one maintenance pass folds into
// reconciliation rollups: a day's fold reads that day's payments (a
// second or so at 3,000 files a day), and the days a new store or an
// upgrade has not folded are read live meanwhile, so a year is folded
// over a day of hourly passes, the newest first.
const foldDaysPerPass = 32

func newRunCmd(stderr io.Writer) *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the daemon: pollers, relay, maintenance and the metrics and health server",
		Long: `run polls every configured source, ingests what arrives, delivers the outbox to
the sinks, prunes by retention, and serves /metrics, /healthz and /readyz.
SIGTERM or SIGINT stops taking new work, lets work in flight finish within 30s,
leaves anything unfinished to lease expiry, and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			log, err := newLogger(cfg.Log.Level, stderr)
			if err != nil {
				return err
			}
			defer log.Sync()
			return runDaemon(cmd.Context(), cfg, log, nil)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "configuration file")
	return cmd
}

// newLogger returns a JSON logger at level writing to w.
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core), nil
}

// daemon holds the running parts, for the demo and tests.
type daemon struct {
	store   store.Store
	relay   *outbox.Relay
	pollers []*poller.Poller
	reg     *prometheus.Registry
	addr    net.Addr
	// console is the console's address, nil when it is off.
	console net.Addr
}

// runDaemon runs until ctx is cancelled. ready, when set, is called once
// everything is started.
func runDaemon(ctx context.Context, cfg config.Config, log *zap.Logger, ready func(*daemon)) error {
	storeCfg := cfg.Store
	storeCfg.MaxConns = cfg.StoreMaxConns()
	// A failover (or a restore into another cluster) may have taken
	// recent commits with it: each poller asks the store again about the
	// files it remembered, so a file whose ingestion is gone is ingested
	// again. The pollers are made below; a failover is noticed only on a
	// connection made after.
	var failovers atomic.Pointer[func(old, new postgres.ServerIdentity)]
	st, err := openStoreWatched(ctx, storeCfg, true, func(old, new postgres.ServerIdentity) {
		if f := failovers.Load(); f != nil {
			(*f)(old, new)
		}
	})
	if err != nil {
		return err
	}
	defer st.Close()
	reads, closeReads, err := openConsoleStore(ctx, storeCfg, st)
	if err != nil {
		return err
	}
	defer closeReads()
	readyz := &readiness{now: time.Now, ping: storePing(st)}
	relayProgress := readyz.loop("relay", relayStall(cfg))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	m.BuildInfo.WithLabelValues(version(), runtime.Version()).Set(1)
	var sourceNames, sinkNames []string
	for _, s := range cfg.Sources {
		sourceNames = append(sourceNames, s.Name)
	}
	for name := range cfg.Sinks {
		sinkNames = append(sinkNames, name)
	}
	m.Init(sourceNames, sinkNames)
	d := &daemon{store: st, reg: reg}

	sinks := map[string]outbox.Deliverer{}
	limits := map[string]outbox.SinkLimits{}
	for name, sc := range cfg.Sinks {
		var s outbox.Deliverer
		if sc.Type == "sftp" {
			fs, err := buildSFTPSink(name, sc, log.Named("sink").With(zap.String("sink", name)))
			if err != nil {
				return err
			}
			defer fs.Close()
			s = fs
		} else {
			hs, err := buildSink(name, sc)
			if err != nil {
				return err
			}
			s = hs
		}
		sinks[name] = progressSink{Deliverer: s, p: relayProgress}
		limits[name] = sc.RelayLimits()
	}
	relayCfg := outbox.RelayConfig{Workers: cfg.Relay.Workers, MaxAttempts: cfg.Relay.MaxAttempts,
		BackoffBase: cfg.Relay.Backoff.Base.D(), BackoffMax: cfg.Relay.Backoff.Max.D(), MaxAge: cfg.Relay.MaxAge.D(),
		Lease: cfg.Relay.Lease.D(), DeadEvents: cfg.DeadEventSink(), Sinks: limits}
	if c, ok := st.(outbox.DatabaseClock); ok {
		relayCfg.Clock = c // replicas judge each other's leases by one clock
	}
	d.relay = outbox.NewRelay(relayCfg, progressStore{Store: st, p: relayProgress}, sinks, log.Named("relay"), m)
	holder := store.NewHolderID()
	waitStandbys := standbysWait(cfg.Store, st)
	var jw *journal.Writer
	if cfg.Poller.Journal != "" {
		if jw, err = journal.Open(cfg.Poller.Journal); err != nil {
			return fmt.Errorf("poller.journal: %w", err)
		}
		defer jw.Close()
	}
	for _, sc := range cfg.Sources {
		src, err := buildSource(sc)
		if err != nil {
			return fmt.Errorf("sources %s: %w", sc.Name, err)
		}
		defer src.Close()
		dec, err := buildDecrypter(sc)
		if err != nil {
			return fmt.Errorf("sources %s: %w", sc.Name, err)
		}
		if dec != nil {
			for _, r := range pgp.Reasons() {
				m.FilesDecryptFailed.WithLabelValues(sc.Name, r)
			}
		}
		d.pollers = append(d.pollers, poller.New(poller.Config{Name: sc.Name, Directories: sc.Directories,
			Include: sc.Include, Exclude: sc.Exclude, PollInterval: sc.PollInterval.D(), StableFor: sc.StableFor.D(),
			After: sc.After, MaxFilesPerPoll: sc.MaxFilesPerPoll, MaxFileSize: sc.MaxFileSize,
			MaxAttempts: sc.MaxAttempts, Downloads: sc.Downloads, MinAge: sc.MinAge.D(), DoneMarker: sc.DoneMarker,
			IncompleteGrace: incompleteGrace(sc.IncompleteGrace.D()), Holder: holder, Decrypt: dec,
			WaitForStandbys: waitStandbys, Journal: jw}, src,
			progressStore{Store: st, p: readyz.loop("poll loop "+sc.Name, pollStall(cfg, sc))},
			inbox.Options{Routes: cfg.RoutesFor(sc.Name), Ack: ackOptions(cfg, sc.Name), Timeout: cfg.Store.IngestTimeout.D()},
			log.Named("poller"), m))
	}

	onFailover := func(old, new postgres.ServerIdentity) {
		m.StoreFailovers.Inc()
		log.Warn("the database is another server than before: a failover or a restore; files the pollers knew are checked against the store again",
			zap.Stringer("old", old), zap.Stringer("new", new))
		for _, p := range d.pollers {
			p.Reverify()
		}
	}
	failovers.Store(&onFailover)

	cs, err := newConsole(cfg, reads, d.relay.BreakerStates, log)
	if err != nil {
		return err
	}
	if cs != nil {
		d.console = cs.ln.Addr()
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		if cs != nil {
			cs.ln.Close()
		}
		return fmt.Errorf("http.listen: %w", err)
	}
	d.addr = ln.Addr()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("/readyz", readyz)
	srv := newHTTPServer(mux)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	if cs != nil {
		cs.run(gctx, g)
	}
	g.Go(func() error { return d.relay.Run(gctx) })
	if l, ok := st.(interface {
		Listen(context.Context, func(), func(error, time.Duration)) error
	}); ok {
		llog := log.Named("listen")
		g.Go(func() error {
			return l.Listen(gctx, d.relay.Wake, func(err error, retryIn time.Duration) {
				llog.Warn("outbox notifications lost; reconnecting", zap.Error(err), zap.Duration("retry_in", retryIn))
			})
		})
	}
	for _, p := range d.pollers {
		g.Go(func() error { return p.Run(gctx) })
	}
	pruner := &outbox.Pruner{Store: st, Keys: cfg.Retention.Keys.D(), Payloads: cfg.Retention.Payloads.D(),
		Holder: store.NewHolderID(), Log: log.Named("maintenance"),
		Fold: func(ctx context.Context, at time.Time) (int, error) {
			return reconcile.FoldClosed(ctx, st, at, cfg.Retention.Keys.D(), foldDaysPerPass)
		}}
	g.Go(func() error { return pruner.Run(gctx) })
	gauges := &outbox.Gauges{Store: reads, States: reads, Metrics: m, Log: log.Named("gauges"), Every: 15 * time.Second,
		Timeout: cfg.Store.ConsoleTimeout.D(),
		Divergent: func(ctx context.Context, now time.Time) (bool, error) {
			rep, err := reconcile.Run(ctx, reads, now.Add(-24*time.Hour), time.Hour, now)
			if err != nil {
				return false, err
			}
			return rep.Divergent, nil
		}}
	g.Go(func() error { return gauges.Run(gctx) })
	silence := &poller.Silence{Store: reads, Metrics: m, Expect: map[string]time.Duration{}, Log: log.Named("silence")}
	for _, src := range cfg.Sources {
		silence.Expect[src.Name] = src.ExpectEvery.D()
	}
	g.Go(func() error { return silence.Run(gctx) })
	g.Go(func() error {
		return watchSchema(gctx, cfg.Store.Driver, st, schemaCheckEvery(cfg), log.Named("schema"))
	})
	log.Info("ediwatch started", zap.String("store", cfg.Store.Driver), zap.Int("sources", len(cfg.Sources)),
		zap.Int("sinks", len(cfg.Sinks)), zap.String("http", d.addr.String()))
	if ready != nil {
		ready(d)
	}
	err = g.Wait()
	log.Info("ediwatch stopped", zap.Error(err))
	return err
}

func buildSink(name string, sc config.Sink) (*sink.HTTP, error) {
	var secrets []string
	if sc.SecretFile != "" {
		s, err := sink.SecretsFromFile(sc.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("sinks.%s.secret_file: %w", name, err)
		}
		secrets = s
	}
	headers := map[string]string{}
	for h, file := range sc.HeaderFiles {
		b, err := secretfile.Read(file)
		if err != nil {
			return nil, fmt.Errorf("sinks.%s.header_files.%s: %w", name, h, err)
		}
		headers[h] = strings.TrimSpace(string(b))
	}
	var tlsCfg *tls.Config
	if sc.TLS.Set() {
		var err error
		if tlsCfg, err = sink.ClientTLS(sink.TLSFiles(sc.TLS)); err != nil {
			return nil, fmt.Errorf("sinks.%s.tls: %w", name, err)
		}
	}
	return sink.New(sink.Config{Name: name, URL: sc.URL, Secrets: secrets, Timeout: sc.Timeout.D(), Raw: sc.Raw, Mode: sc.Mode,
		Headers: headers, TLS: tlsCfg})
}

// buildSFTPSink builds a sink of type sftp; it connects on its first
// delivery.
func buildSFTPSink(name string, sc config.Sink, log *zap.Logger) (*sftpsink.SFTP, error) {
	var enc *pgp.Encrypter
	if sc.EncryptTo != "" {
		var err error
		enc, err = pgp.NewEncrypter(sc.EncryptTo, pgp.SignFiles{PrivateKeyFile: sc.SignWith.PrivateKeyFile,
			PassphraseFile: sc.SignWith.PassphraseFile})
		if err != nil {
			return nil, fmt.Errorf("sinks.%s: %w", name, err)
		}
	}
	s, err := sftpsink.New(sftpsink.Config{Name: name, Conn: sftp.Config{Address: sc.Address, User: sc.User,
		PrivateKeyFile: sc.PrivateKeyFile, PassphraseFile: sc.PassphraseFile, PasswordFile: sc.PasswordFile,
		KnownHostsFile: sc.KnownHostsFile}, Directory: sc.Directory, TempSuffix: sc.TempSuffix, Direct: !sc.Rename,
		Pattern: sc.Name, Timeout: sc.Timeout.D(), Encrypt: enc, Log: log})
	if err != nil {
		return nil, fmt.Errorf("sinks.%s: %w", name, err)
	}
	return s, nil
}

// incompleteGrace maps the configured grace to the poller's: 0s in the
// configuration turns the grace off, which the poller spells negative.
func incompleteGrace(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// buildDecrypter reads a source's OpenPGP keys; nil when it has none.
func buildDecrypter(sc config.Source) (*pgp.Decrypter, error) {
	if sc.Decrypt.PrivateKeyFile == "" {
		return nil, nil
	}
	d, err := pgp.NewDecrypter(pgp.DecryptFiles{PrivateKeyFile: sc.Decrypt.PrivateKeyFile,
		PassphraseFile: sc.Decrypt.PassphraseFile, VerifyKeyFile: sc.Decrypt.VerifyKeyFile}, sc.RequireEncryption)
	if err != nil {
		return nil, err
	}
	// max_file_size bounds the plaintext too (a compression bomb), for
	// `ediwatch ingest --source` as for the poller.
	return d.Limit(sc.MaxFileSize), nil
}

func buildSource(sc config.Source) (poller.Source, error) {
	if sc.Type == "local" {
		return local.Source{}, nil
	}
	return sftp.New(sftp.Config{Address: sc.Address, User: sc.User, PrivateKeyFile: sc.PrivateKeyFile,
		PassphraseFile: sc.PassphraseFile, PasswordFile: sc.PasswordFile, KnownHostsFile: sc.KnownHostsFile})
}

// version is the module version the binary was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "unknown"
}

// newHTTPServer returns the metrics and health server: every phase of a
// request is bounded, so slow or idle clients cannot hold connections.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
}
