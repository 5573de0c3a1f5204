// Package config is ediwatch's configuration: a typed, documented struct
// with defaults, read from a YAML file with EDIWATCH_* environment
// overrides. Unknown keys are errors; Validate names the key path, the rule
// and the value it got. Secrets are never inline: only file references,
// read when used.
package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/secretfile"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/sink/sftpsink"
	"github.com/ediwatch/ediwatch/internal/store"
)

// Duration is a time.Duration that also accepts days ("400d").
type Duration time.Duration

// D returns the duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string {
	t := time.Duration(d)
	if t > 0 && t%(24*time.Hour) == 0 {
		return strconv.Itoa(int(t/(24*time.Hour))) + "d"
	}
	return t.String()
}

// ParseDuration parses a Go duration or a whole number of days ("30d").
func ParseDuration(s string) (Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return Duration(time.Duration(days) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return Duration(d), nil
}

// Config is the whole configuration.
type Config struct {
	Store   Store           `mapstructure:"store"`
	Sources []Source        `mapstructure:"sources"`
	Sinks   map[string]Sink `mapstructure:"sinks"`
	// Routes maps an effect kind to the sinks that deliver it: one name
	// or a list (one outbox row per effect and sink).
	Routes    map[string][]string `mapstructure:"routes"`
	Relay     Relay               `mapstructure:"relay"`
	Retention Retention           `mapstructure:"retention"`
	HTTP      HTTP                `mapstructure:"http"`
	Log       Log                 `mapstructure:"log"`
	// Console is the operator console, off unless console.listen is set.
	Console Console `mapstructure:"console"`
	// Poller holds what every source's poller shares.
	Poller Poller `mapstructure:"poller"`
}

// Poller holds what every source's poller shares.
type Poller struct {
	// Journal, when set, is the path of an append-only file on local disk
	// where every file deleted or moved from a drop is recorded before it
	// goes (one synchronous write a file): the witness
	// "ediwatch reconcile --journal" compares with the store after a
	// failover or a restore. Several replicas need one file each.
	Journal string `mapstructure:"journal"`
}

// Store selects the store driver.
type Store struct {
	// Driver is sqlite (embedded, default) or postgres.
	Driver string `mapstructure:"driver"`
	// DSN is "file:ediwatch.db" for sqlite, postgres://... for postgres.
	DSN string `mapstructure:"dsn"`
	// DSNFile, when set, holds the DSN (a postgres password stays out of
	// the config).
	DSNFile string `mapstructure:"dsn_file"`
	// Migrate applies pending migrations at start (default true).
	Migrate bool `mapstructure:"migrate"`
	// MaxConns bounds the store's connection pool; 0 (default) sizes it
	// from the rest of the configuration (see Config.StoreMaxConns).
	MaxConns int `mapstructure:"max_conns"`
	// IngestTimeout is the deadline of one file's ingest, parse and write
	// (default 10m); a file that misses it is retried by a later poll.
	IngestTimeout Duration `mapstructure:"ingest_timeout"`
	// ConsoleConns bounds the second, small pool that the console, the
	// outbox gauges and the silence alarm read through (default 4), so
	// however many viewers the console has, the relay and ingest keep
	// every connection of their own pool.
	ConsoleConns int `mapstructure:"console_conns"`
	// ConsoleTimeout bounds each statement of that pool (PostgreSQL's
	// statement_timeout) and each console page's reading (default 15s).
	ConsoleTimeout Duration `mapstructure:"console_timeout"`
	// WaitForStandbys (PostgreSQL) is how many standbys must have flushed
	// the commit that recorded a file before its delete or move: "auto"
	// (default) every standby streaming from the primary at that moment,
	// "0" none (no wait), or a number N for at least N.
	WaitForStandbys string `mapstructure:"wait_for_standbys"`
	// ListenDSN (PostgreSQL), when set, is a direct connection to the
	// primary for the LISTEN that wakes the relays, for a DSN that names
	// a pooler in transaction mode (PgBouncer), which cannot carry one.
	// No password inline (PGPASSFILE or a .pgpass file serve it).
	ListenDSN string `mapstructure:"listen_dsn"`
}

// Standbys returns store.wait_for_standbys as every streaming standby
// (all) or at least n; it is valid (Validate).
func (s Store) Standbys() (all bool, n int) {
	if s.WaitForStandbys == "auto" || s.WaitForStandbys == "" {
		return true, 0
	}
	n, _ = strconv.Atoi(s.WaitForStandbys)
	return false, n
}

// StoreMaxConns returns the pool size: store.max_conns when set, else one
// connection for LISTEN, one per concurrent download of every source (each
// may be ingesting), one per relay worker, and a margin of 4 for the lease
// reaper, maintenance, /readyz and a spare (the gauges read through
// the console's pool, store.console_conns).
func (c Config) StoreMaxConns() int {
	if c.Store.MaxConns > 0 {
		return c.Store.MaxConns
	}
	n := 1 + c.Relay.Workers + 4
	for _, s := range c.Sources {
		n += max(s.Downloads, 1)
	}
	return n
}

func hasPassword(u *url.URL) bool {
	_, has := u.User.Password()
	return has
}

// multiHostRule returns what a PostgreSQL URL naming several hosts (a
// replicated cluster: "postgres://u@db1:5432,db2:5432/db") breaks, "" when
// nothing: without target_session_attrs=read-write (or primary) a
// connection may reach a standby, where every write fails, and a
// reconnect after a failover may not find the new primary.
func multiHostRule(u *url.URL) string {
	if !strings.Contains(u.Host, ",") {
		return ""
	}
	switch u.Query().Get("target_session_attrs") {
	case "read-write", "primary":
		return ""
	}
	return "names several hosts: add target_session_attrs=read-write, so every connection and every reconnect after a failover reaches the primary"
}

// CheckPostgresDSN checks a PostgreSQL URL read from store.dsn_file as
// Validate checks store.dsn, for what it can tell without a password.
func CheckPostgresDSN(dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil // a keyword/value DSN: the driver parses it
	}
	if rule := multiHostRule(u); rule != "" {
		return fmt.Errorf("store.dsn_file: the DSN %s", rule)
	}
	return nil
}

// ResolveDSN returns the DSN, read from DSNFile when set.
func (s Store) ResolveDSN() (string, error) {
	if s.DSNFile == "" {
		return s.DSN, nil
	}
	b, err := secretfile.Read(s.DSNFile)
	if err != nil {
		return "", fmt.Errorf("store.dsn_file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// SinkTLS names the files of an https sink's TLS settings (sink.TLSFiles):
// the PEM certificates that vouch for the receiver instead of the system
// roots, and the client certificate and key presented to a receiver that
// asks for one.
type SinkTLS struct {
	CAFile   string `mapstructure:"ca_file"`
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
}

// Set reports whether any of t's files is named.
func (t SinkTLS) Set() bool { return t != SinkTLS{} }

// Source is one drop to poll.
type Source struct {
	Name string `mapstructure:"name"`
	// Type is sftp or local.
	Type    string `mapstructure:"type"`
	Address string `mapstructure:"address"` // host:port (sftp)
	User    string `mapstructure:"user"`
	// PrivateKeyFile or PasswordFile authenticate (sftp); never inline.
	PrivateKeyFile string `mapstructure:"private_key_file"`
	PassphraseFile string `mapstructure:"passphrase_file"`
	PasswordFile   string `mapstructure:"password_file"`
	// KnownHostsFile is required for sftp: unknown host keys are refused.
	KnownHostsFile  string   `mapstructure:"known_hosts_file"`
	Directories     []string `mapstructure:"directories"`
	Include         []string `mapstructure:"include"`
	Exclude         []string `mapstructure:"exclude"`
	PollInterval    Duration `mapstructure:"poll_interval"`
	StableFor       Duration `mapstructure:"stable_for"`
	After           string   `mapstructure:"after"` // leave | delete | move:DIR
	MaxFilesPerPoll int      `mapstructure:"max_files_per_poll"`
	MaxFileSize     int64    `mapstructure:"max_file_size"`
	MaxAttempts     int      `mapstructure:"max_attempts"`
	Downloads       int      `mapstructure:"downloads"` // concurrent downloads
	// MinAge: a file is taken only once its mtime is this old.
	MinAge Duration `mapstructure:"min_age"`
	// DoneMarker, when set, names a sidecar that must exist before a file
	// is taken, {name} standing for the file's name ("{name}.done").
	DoneMarker string `mapstructure:"done_marker"`
	// IncompleteGrace: a file whose last interchange has no IEA is left
	// for a later poll while its mtime is younger than this (0s: never).
	IncompleteGrace Duration `mapstructure:"incomplete_grace"`
	// ExpectEvery, when positive, is the longest the source may go without
	// a new file (e.g. 26h for a daily remittance) before it counts as
	// overdue (metric ediwatch_source_overdue); 0s: never.
	ExpectEvery Duration `mapstructure:"expect_every"`
	// Us and Them override the interchange ids of our acknowledgments
	// ("QUAL:ID"); by default they answer with the received ids swapped.
	Us   string `mapstructure:"us"`
	Them string `mapstructure:"them"`
	// Ack277 answers 277 claim acknowledgments with a 999 (default false:
	// a 277 is itself an acknowledgment, and ediwatch never acknowledges
	// one unless the partner asks for it).
	Ack277 bool `mapstructure:"ack_277"`
	// Routes overrides Config.Routes, kind by kind, for what this source
	// produced (e.g. its acknowledgments back to its partner's folder).
	Routes map[string][]string `mapstructure:"routes"`
	// Decrypt, when its private_key_file is set, decrypts the OpenPGP
	// messages among the files (recognised by content, whatever their
	// names); plaintext files are ingested as they are unless
	// RequireEncryption.
	Decrypt Decrypt `mapstructure:"decrypt"`
	// RequireEncryption refuses every file that is not an encrypted
	// OpenPGP message (needs decrypt.private_key_file).
	RequireEncryption bool `mapstructure:"require_encryption"`
}

// Decrypt names the key files of a source whose partner sends OpenPGP
// messages (internal/pgp). Keys and passphrases are read from files only.
type Decrypt struct {
	// PrivateKeyFile holds our private key (armored or binary), which
	// the partner encrypts to.
	PrivateKeyFile string `mapstructure:"private_key_file"`
	// PassphraseFile holds its passphrase (first line), if it has one.
	PassphraseFile string `mapstructure:"passphrase_file"`
	// VerifyKeyFile, when set, holds the partner's public key: every
	// message must then be signed with it.
	VerifyKeyFile string `mapstructure:"verify_key_file"`
}

// SignWith names our signing key for the files an SFTP sink encrypts.
type SignWith struct {
	PrivateKeyFile string `mapstructure:"private_key_file"`
	PassphraseFile string `mapstructure:"passphrase_file"`
}

// Sink is an HTTP endpoint or an SFTP directory.
type Sink struct {
	// Type is http (default) or sftp.
	Type string `mapstructure:"type"`
	URL  string `mapstructure:"url"`
	// SecretFile holds Standard Webhooks secrets (whsec_...), one per line.
	SecretFile string   `mapstructure:"secret_file"`
	Timeout    Duration `mapstructure:"timeout"`
	// Raw sends acknowledgments as application/edi-x12 instead of JSON.
	Raw bool `mapstructure:"raw"`
	// HeaderFiles maps a header name to a file holding its value.
	HeaderFiles map[string]string `mapstructure:"header_files"`
	// AllowInsecure permits an http:// URL on a host other than loopback
	// (payloads and signatures then cross the network in clear).
	AllowInsecure bool `mapstructure:"allow_insecure"`
	// TLS is an https sink's own trust and identity: a private CA, a
	// client certificate (sink.TLSFiles).
	TLS SinkTLS `mapstructure:"tls"`
	// Mode is the CloudEvents HTTP content mode: structured (default; the
	// JSON event is the body) or binary (the event's data is the body, its
	// attributes ce-* headers).
	Mode string `mapstructure:"mode"`
	// Breaker tunes the sink's circuit breaker.
	Breaker Breaker `mapstructure:"breaker"`
	// RateLimit caps the requests per second this process sends to the
	// sink, shared by all relay workers (0: no cap). Each replica has its
	// own: N replicas send up to N times as much.
	RateLimit float64 `mapstructure:"rate_limit"`
	// Concurrency caps the requests in flight from this process to the
	// sink (0: no cap but relay.workers). Per replica, like RateLimit.
	Concurrency int `mapstructure:"concurrency"`
	// The settings of a sink of type sftp: the connection as a source's
	// (known_hosts required), the directory, and how files are named and
	// placed (see internal/sink/sftpsink).
	Address        string `mapstructure:"address"`
	User           string `mapstructure:"user"`
	PrivateKeyFile string `mapstructure:"private_key_file"`
	PassphraseFile string `mapstructure:"passphrase_file"`
	PasswordFile   string `mapstructure:"password_file"`
	KnownHostsFile string `mapstructure:"known_hosts_file"`
	Directory      string `mapstructure:"directory"`
	// TempSuffix names the file while it is uploaded (default .part).
	TempSuffix string `mapstructure:"temp_suffix"`
	// Rename uploads under the temporary name and renames (default true);
	// false writes the final name directly (servers without RENAME).
	Rename bool `mapstructure:"rename"`
	// Name is the final file-name pattern (sftpsink.CheckPattern).
	Name string `mapstructure:"name"`
	// EncryptTo, when set (type sftp), is the partner's OpenPGP public
	// key file: every file is encrypted to it before upload.
	EncryptTo string `mapstructure:"encrypt_to"`
	// SignWith, when its private_key_file is set, signs what EncryptTo
	// encrypts with our key.
	SignWith SignWith `mapstructure:"sign_with"`
}

// RoutesFor returns the routes of what the source produced: the global
// routes with the source's own in place of theirs, kind by kind.
func (c Config) RoutesFor(source string) map[string][]string {
	out := make(map[string][]string, len(c.Routes))
	for k, v := range c.Routes {
		out[k] = v
	}
	for _, s := range c.Sources {
		if s.Name == source {
			for k, v := range s.Routes {
				out[k] = v
			}
		}
	}
	return out
}

// DeadEventSink returns the sink delivery.dead events go to: the first
// sink of its route, "" when unrouted.
func (c Config) DeadEventSink() string {
	if r := c.Routes[outbox.KindDeliveryDead]; len(r) > 0 {
		return r[0]
	}
	return ""
}

// Breaker is a sink's circuit breaker: Failures consecutive retryable
// failures open it; after Cooldown one trial request goes through
// (half-open), and its success closes it.
type Breaker struct {
	Failures int      `mapstructure:"failures"`
	Cooldown Duration `mapstructure:"cooldown"`
}

// RelayLimits returns the sink's settings as the relay takes them.
func (s Sink) RelayLimits() outbox.SinkLimits {
	return outbox.SinkLimits{BreakerFailures: uint32(min(max(s.Breaker.Failures, 0), math.MaxUint32)), BreakerCooldown: s.Breaker.Cooldown.D(),
		RateLimit: s.RateLimit, Concurrency: s.Concurrency}
}

// Relay tunes delivery.
type Relay struct {
	Workers     int      `mapstructure:"workers"`
	MaxAttempts int      `mapstructure:"max_attempts"`
	Backoff     Backoff  `mapstructure:"backoff"`
	MaxAge      Duration `mapstructure:"max_age"`
	Lease       Duration `mapstructure:"lease"`
}

// Backoff is an exponential backoff with full jitter.
type Backoff struct {
	Base Duration `mapstructure:"base"`
	Max  Duration `mapstructure:"max"`
}

// Retention bounds what is kept.
type Retention struct {
	Keys         Duration `mapstructure:"keys"`
	ReplayWindow Duration `mapstructure:"replay_window"`
	// Payloads is how long a delivered or discarded row keeps its
	// payload (default 30 days); after, its residue (payer, trace,
	// amount) stays with the row, as long as Keys.
	Payloads Duration `mapstructure:"payloads"`
}

// HTTP is the metrics and health server.
type HTTP struct {
	Listen string `mapstructure:"listen"`
}

// Console is the operator console (internal/console), served by run on
// its own listener. It is off unless Listen is set.
type Console struct {
	Listen string `mapstructure:"listen"`
	// TokenFile holds the viewers' token (read only); AdminTokenFile the
	// admins' (replay, discard, enable and disable sinks). Whitespace
	// around a token is trimmed.
	TokenFile      string `mapstructure:"token_file"`
	AdminTokenFile string `mapstructure:"admin_token_file"`
	// TLSCertFile and TLSKeyFile, both or neither, serve HTTPS.
	TLSCertFile string `mapstructure:"tls_cert_file"`
	TLSKeyFile  string `mapstructure:"tls_key_file"`
	// AllowInsecure permits plain HTTP on an address other than loopback.
	AllowInsecure bool `mapstructure:"allow_insecure"`
}

// Enabled reports whether the console is configured.
func (c Console) Enabled() bool { return c.Listen != "" }

// TLS reports whether the console serves HTTPS.
func (c Console) TLS() bool { return c.TLSCertFile != "" }

// Log configures logging.
type Log struct {
	Level string `mapstructure:"level"`
}

// Default returns the configuration with every default set.
func Default() Config {
	relay := outbox.DefaultRelayConfig()
	return Config{
		Store: Store{Driver: "sqlite", DSN: "file:ediwatch.db", Migrate: true,
			IngestTimeout: Duration(10 * time.Minute), ConsoleConns: 4, ConsoleTimeout: Duration(15 * time.Second),
			WaitForStandbys: "auto"},
		Routes: map[string][]string{},
		Sinks:  map[string]Sink{},
		Relay: Relay{Workers: relay.Workers, MaxAttempts: relay.MaxAttempts,
			Backoff: Backoff{Base: Duration(relay.BackoffBase), Max: Duration(relay.BackoffMax)},
			MaxAge:  Duration(relay.MaxAge), Lease: Duration(relay.Lease)},
		Retention: Retention{Keys: Duration(400 * 24 * time.Hour), ReplayWindow: Duration(30 * 24 * time.Hour),
			Payloads: Duration(30 * 24 * time.Hour)},
		HTTP: HTTP{Listen: "127.0.0.1:9464"},
		Log:  Log{Level: "info"},
	}
}

// sourceDefaults and sinkDefaults are the values of keys a source or sink
// leaves out. They apply to absent keys only, so an explicit zero (e.g.
// stable_for: 0s) stays zero.
// The poller's and the sink's own defaults are taken from them; the poll
// interval and stable_for are the configuration's.
func sourceDefaults() map[string]any {
	p := poller.Defaults()
	include := make([]any, len(p.Include))
	for i, s := range p.Include {
		include[i] = s
	}
	return map[string]any{
		"type": "sftp", "include": include, "poll_interval": "1m", "stable_for": "30s", "after": p.After,
		"max_files_per_poll": p.MaxFilesPerPoll, "max_file_size": p.MaxFileSize, "max_attempts": p.MaxAttempts,
		"downloads": p.Downloads, "min_age": "0s", "done_marker": "", "incomplete_grace": p.IncompleteGrace.String(),
		"expect_every": "0s",
	}
}

func sinkDefaults() map[string]any {
	// An empty breaker map lets breakerDefaults fill it when the key is
	// absent.
	return map[string]any{"timeout": sink.DefaultTimeout.String(), "mode": sink.ModeStructured,
		"breaker": map[string]any{}, "type": "http", "temp_suffix": sftpsink.DefaultTempSuffix, "rename": true,
		"name": sftpsink.DefaultName}
}

// breakerDefaults are the relay-wide breaker settings every sink starts
// from.
func breakerDefaults() map[string]any {
	r := outbox.DefaultRelayConfig()
	return map[string]any{"failures": int(r.BreakerFailures), "cooldown": r.BreakerTimeout.String()}
}

// defaultsHook fills absent keys of each source and sink before decoding.
func defaultsHook(from, to reflect.Type, data any) (any, error) {
	var defaults map[string]any
	switch to {
	case reflect.TypeOf(Source{}):
		defaults = sourceDefaults()
	case reflect.TypeOf(Sink{}):
		defaults = sinkDefaults()
	case reflect.TypeOf(Breaker{}):
		defaults = breakerDefaults()
	default:
		return data, nil
	}
	m, ok := data.(map[string]any)
	if !ok {
		return data, nil
	}
	out := make(map[string]any, len(m)+len(defaults))
	for k, v := range defaults {
		out[k] = v
	}
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}

// routesHook lets a route name one sink as a plain string: routes (a map
// of kind to sinks) take a string value as a list of one.
func routesHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(map[string][]string{}) {
		return data, nil
	}
	m, ok := data.(map[string]any)
	if !ok {
		return data, nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = []any{s}
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// durationHook decodes Duration from strings ("1m", "400d").
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(Duration(0)) {
		return data, nil
	}
	switch v := data.(type) {
	case string:
		return ParseDuration(v)
	case int:
		return Duration(time.Duration(v) * time.Second), nil
	}
	return data, nil
}

// Load reads the YAML file at path (none when empty), applies EDIWATCH_*
// environment overrides (EDIWATCH_STORE_DSN for store.dsn), fills defaults
// and validates. Unknown keys are errors.
func Load(path string) (Config, error) {
	// Route keys hold dots (payment.posted): viper's own key paths use "::".
	v := viper.NewWithOptions(viper.KeyDelimiter("::"))
	v.SetConfigType("yaml")
	v.SetEnvPrefix("EDIWATCH")
	v.SetEnvKeyReplacer(strings.NewReplacer("::", "_"))
	v.AutomaticEnv()
	def := Default()
	// Every scalar key is made known so the environment can set it.
	for _, k := range []string{"store.driver", "store.dsn", "store.dsn_file", "store.migrate", "store.max_conns",
		"store.ingest_timeout", "store.console_conns", "store.console_timeout", "store.wait_for_standbys", "store.listen_dsn", "relay.workers",
		"relay.max_attempts", "relay.backoff.base", "relay.backoff.max", "relay.max_age", "relay.lease",
		"retention.keys", "retention.replay_window", "retention.payloads", "http.listen", "log.level",
		"console.listen", "console.token_file", "console.admin_token_file", "console.tls_cert_file",
		"console.tls_key_file", "console.allow_insecure", "poller.journal"} {
		v.SetDefault(strings.ReplaceAll(k, ".", "::"), lookup(def, k))
	}
	if path != "" {
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("read config %s: %w", path, err)
		}
	}
	// Every problem is reported at once: unknown keys by key path, then
	// what decoding or validation finds.
	errs := unknownKeys(v.AllSettings(), reflect.TypeOf(Config{}), "")
	cfg := def
	if err := v.Unmarshal(&cfg, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(defaultsHook, routesHook, durationHook))); err != nil {
		errs = append(errs, cleanDecodeError(err).Error())
	} else if err := cfg.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		if path != "" {
			return Config{}, fmt.Errorf("config %s:\n%s", path, strings.Join(errs, "\n"))
		}
		return Config{}, errors.New(strings.Join(errs, "\n"))
	}
	return cfg, nil
}

func lookup(c Config, key string) any {
	switch key {
	case "store.driver":
		return c.Store.Driver
	case "store.dsn":
		return c.Store.DSN
	case "store.dsn_file":
		return c.Store.DSNFile
	case "store.migrate":
		return c.Store.Migrate
	case "store.max_conns":
		return c.Store.MaxConns
	case "store.ingest_timeout":
		return c.Store.IngestTimeout.String()
	case "store.console_conns":
		return c.Store.ConsoleConns
	case "store.console_timeout":
		return c.Store.ConsoleTimeout.String()
	case "store.wait_for_standbys":
		return c.Store.WaitForStandbys
	case "store.listen_dsn":
		return c.Store.ListenDSN
	case "poller.journal":
		return c.Poller.Journal
	case "relay.workers":
		return c.Relay.Workers
	case "relay.max_attempts":
		return c.Relay.MaxAttempts
	case "relay.backoff.base":
		return c.Relay.Backoff.Base.String()
	case "relay.backoff.max":
		return c.Relay.Backoff.Max.String()
	case "relay.max_age":
		return c.Relay.MaxAge.String()
	case "relay.lease":
		return c.Relay.Lease.String()
	case "retention.keys":
		return c.Retention.Keys.String()
	case "retention.replay_window":
		return c.Retention.ReplayWindow.String()
	case "retention.payloads":
		return c.Retention.Payloads.String()
	case "http.listen":
		return c.HTTP.Listen
	case "log.level":
		return c.Log.Level
	case "console.listen":
		return c.Console.Listen
	case "console.token_file":
		return c.Console.TokenFile
	case "console.admin_token_file":
		return c.Console.AdminTokenFile
	case "console.tls_cert_file":
		return c.Console.TLSCertFile
	case "console.tls_key_file":
		return c.Console.TLSKeyFile
	case "console.allow_insecure":
		return c.Console.AllowInsecure
	}
	return nil
}

var dsnPassword = regexp.MustCompile(`(://[^:/@]*:)[^@]*@`)

// Redact hides a password inside a URL-like string.
func Redact(s string) string { return dsnPassword.ReplaceAllString(s, "${1}[redacted]@") }

func cleanDecodeError(err error) error {
	return errors.New(Redact(strings.ReplaceAll(err.Error(), "\n", "; ")))
}

// queryPassword reports whether a postgres URL carries a password in its
// query (password= or sslpassword=, which pgx reads as it does the
// userinfo's).
func queryPassword(u *url.URL) bool {
	for k := range u.Query() {
		if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
			return true
		}
	}
	return false
}

// loopback reports whether host is this machine.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Validate checks every value and names the first bad one by its key path.
func (c *Config) Validate() error {
	var errs []string
	bad := func(path, rule string, got any) {
		errs = append(errs, fmt.Sprintf("%s: %s (got %v)", path, rule, got))
	}
	switch c.Store.Driver {
	case "sqlite", "postgres":
	default:
		bad("store.driver", "must be sqlite or postgres", quote(c.Store.Driver))
	}
	if c.Store.DSN == "" && c.Store.DSNFile == "" {
		bad("store.dsn", "must be set (or store.dsn_file)", `""`)
	}
	if c.Store.Driver == "postgres" && c.Store.DSNFile == "" {
		if u, err := url.Parse(c.Store.DSN); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			// Redact knows a URL's password; a keyword/value DSN's
			// ("password=…") it would print, so that is not shown.
			got := "a value not shown (it may hold a password)"
			if err == nil && u.Scheme != "" && u.Host != "" {
				got = quote(Redact(c.Store.DSN))
			}
			bad("store.dsn", "must be a postgres:// URL", got)
		} else if _, has := u.User.Password(); has {
			bad("store.dsn", "must not hold a password inline; use store.dsn_file", quote(Redact(c.Store.DSN)))
		} else if queryPassword(u) {
			bad("store.dsn", "must not hold a password inline; use store.dsn_file", quote(sink.RedactURL(c.Store.DSN)))
		} else if rule := multiHostRule(u); rule != "" {
			bad("store.dsn", rule, quote(Redact(c.Store.DSN)))
		}
	}
	if l := c.Store.ListenDSN; l != "" {
		switch u, err := url.Parse(l); {
		case c.Store.Driver != "postgres":
			bad("store.listen_dsn", "is for the postgres driver", quote(Redact(l)))
		case err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql"):
			bad("store.listen_dsn", "must be a postgres:// URL", "a value not shown (it may hold a password)")
		case hasPassword(u) || queryPassword(u):
			bad("store.listen_dsn", "must not hold a password inline (a .pgpass file or PGPASSFILE serves it)",
				quote(sink.RedactURL(l)))
		case multiHostRule(u) != "":
			bad("store.listen_dsn", multiHostRule(u), quote(Redact(l)))
		}
	}
	if c.Store.MaxConns != 0 && c.Store.MaxConns < 2 {
		bad("store.max_conns", "must be 0 (sized from the configuration) or at least 2", c.Store.MaxConns)
	}
	if c.Store.IngestTimeout <= 0 {
		bad("store.ingest_timeout", "must be positive", c.Store.IngestTimeout.D())
	}
	if w := c.Store.WaitForStandbys; w != "auto" {
		if n, err := strconv.Atoi(w); err != nil || n < 0 {
			bad("store.wait_for_standbys", "must be auto or a number of standbys (0: no wait)", quote(w))
		}
	}
	if c.Store.ConsoleConns < 1 {
		bad("store.console_conns", "must be at least 1", c.Store.ConsoleConns)
	}
	if c.Store.ConsoleTimeout < Duration(time.Second) {
		bad("store.console_timeout", "must be at least 1s", c.Store.ConsoleTimeout.D())
	}
	names := map[string]bool{}
	// polled: each directory (its server and cleaned path) and who polls
	// it. Each source's poll takes a lease of its own on it, so two
	// polls of one directory take each other's files mid-download,
	// unless include patterns keep their files apart.
	type poll struct {
		at      string
		include []string
	}
	polled := map[string]poll{}
	// apart: two include lists that can keep files apart (neither takes
	// every file, no pattern in both); overlapping patterns are the
	// configuration's to avoid.
	apart := func(a, b []string) bool {
		for _, x := range a {
			if x == "*" || slices.Contains(b, x) {
				return false
			}
		}
		return !slices.Contains(b, "*")
	}
	for i, s := range c.Sources {
		p := fmt.Sprintf("sources[%d]", i)
		for j, d := range s.Directories {
			at := fmt.Sprintf("%s.directories[%d]", p, j)
			key := s.Type + "\x00" + s.Address + "\x00" + path.Clean(d)
			if prev, ok := polled[key]; ok && (strings.HasPrefix(prev.at, p+".") || !apart(prev.include, s.Include)) {
				bad(at, "names the directory "+prev.at+" polls: two polls of one directory take each other's files "+
					"(list it once; two sources may share a directory only with include patterns that keep their files apart)",
					quote(d))
			} else if !ok {
				polled[key] = poll{at: at, include: s.Include}
			}
		}
		if !validName(s.Name) {
			bad(p+".name", "must be letters, digits, '-' or '_'", quote(s.Name))
		}
		if names[s.Name] {
			bad(p+".name", "must be unique", quote(s.Name))
		}
		names[s.Name] = true
		switch s.Type {
		case "sftp":
			checkSFTPLogin(p, s.Address, s.User, s.PrivateKeyFile, s.PasswordFile, s.KnownHostsFile, bad)
		case "local":
		default:
			bad(p+".type", "must be sftp or local", quote(s.Type))
		}
		if len(s.Directories) == 0 {
			bad(p+".directories", "must name at least one directory", "[]")
		}
		if s.PollInterval <= 0 {
			bad(p+".poll_interval", "must be positive", s.PollInterval.D())
		}
		if s.StableFor < 0 {
			bad(p+".stable_for", "must not be negative", s.StableFor.D())
		}
		if s.MinAge < 0 {
			bad(p+".min_age", "must not be negative", s.MinAge.D())
		}
		if s.IncompleteGrace < 0 {
			bad(p+".incomplete_grace", "must not be negative", s.IncompleteGrace.D())
		}
		if s.ExpectEvery < 0 {
			bad(p+".expect_every", "must not be negative", s.ExpectEvery.D())
		}
		if s.DoneMarker != "" && (strings.Count(s.DoneMarker, "{name}") != 1 || s.DoneMarker == "{name}" ||
			strings.ContainsAny(s.DoneMarker, "/\\*?[")) {
			bad(p+".done_marker", "must contain {name} once, plus a prefix or suffix, and no path or glob characters (e.g. \"{name}.done\")",
				quote(s.DoneMarker))
		}
		if s.After != "leave" && s.After != "delete" && !(strings.HasPrefix(s.After, "move:") && len(s.After) > 5) {
			bad(p+".after", "must be leave, delete or move:DIR", quote(s.After))
		}
		if s.MaxFilesPerPoll < 1 {
			bad(p+".max_files_per_poll", "must be at least 1", s.MaxFilesPerPoll)
		}
		if s.MaxFileSize < 1 {
			bad(p+".max_file_size", "must be positive", s.MaxFileSize)
		}
		validateDecrypt(p, s, bad)
		for _, id := range []struct{ k, v string }{{"us", s.Us}, {"them", s.Them}} {
			if id.v != "" {
				if q, v, ok := strings.Cut(id.v, ":"); !ok || len(q) != 2 || v == "" || len(v) > 15 {
					bad(p+"."+id.k, "must be QUAL:ID (2-character qualifier, id of 1 to 15 characters)", quote(id.v))
				}
			}
		}
	}
	for name, s := range c.Sinks {
		p := "sinks." + name
		validatePGPSink(p, s, bad)
		switch s.Type {
		case "sftp":
			c.validateSFTPSink(p, s, bad)
			if s.TLS.Set() {
				bad(p+".tls", "is for an https sink, not an sftp one", quote(s.TLS.CAFile+", "+s.TLS.CertFile+", "+s.TLS.KeyFile))
			}
		case "http":
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				bad(p+".url", "must be an http or https URL", quote(sink.RedactURL(s.URL)))
			} else if u.User != nil {
				bad(p+".url", "must not hold credentials; use header_files", quote(sink.RedactURL(s.URL)))
			} else if u.Scheme == "http" && !loopback(u.Hostname()) && !s.AllowInsecure {
				bad(p+".url", "must be https for a host other than loopback (or set "+p+".allow_insecure: true)",
					quote(sink.RedactURL(s.URL)))
			}
			if s.Mode != sink.ModeStructured && s.Mode != sink.ModeBinary {
				bad(p+".mode", "must be structured or binary", quote(s.Mode))
			}
			if s.TLS.Set() && err == nil && u.Scheme != "https" {
				bad(p+".tls", "is for an https url", quote(sink.RedactURL(s.URL)))
			}
			if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") {
				bad(p+".tls", "cert_file and key_file go together", quote(s.TLS.CertFile+", "+s.TLS.KeyFile))
			}
		default:
			bad(p+".type", "must be http or sftp", quote(s.Type))
		}
		if s.Timeout <= 0 {
			bad(p+".timeout", "must be positive", s.Timeout.D())
		}
		if s.Breaker.Failures < 1 {
			bad(p+".breaker.failures", "must be at least 1", s.Breaker.Failures)
		}
		if s.Breaker.Cooldown <= 0 {
			bad(p+".breaker.cooldown", "must be positive", s.Breaker.Cooldown.D())
		}
		if s.RateLimit < 0 || math.IsNaN(s.RateLimit) || math.IsInf(s.RateLimit, 0) {
			bad(p+".rate_limit", "must be a number of requests per second, 0 for no limit", s.RateLimit)
		}
		if s.Concurrency < 0 {
			bad(p+".concurrency", "must be 0 (no limit) or at least 1", s.Concurrency)
		}
	}
	for kind, sinks := range c.Routes {
		// delivery.dead (the relay's event for a dead-lettered row) may be
		// routed, and need not be.
		if kinds := append(process.EffectKinds(), outbox.KindDeliveryDead); !contains(kinds, kind) {
			bad("routes."+kind, "is not an effect kind ("+strings.Join(kinds, ", ")+")", quote(kind))
		}
		c.validateRoute("routes."+kind, sinks, bad)
		if kind == outbox.KindDeliveryDead && len(sinks) > 1 {
			// The relay records each dead row's event for one sink.
			bad("routes."+kind, "takes one sink (delivery.dead events are recorded for one)", quote(strings.Join(sinks, ", ")))
		}
	}
	for i, s := range c.Sources {
		for kind, sinks := range s.Routes {
			p := fmt.Sprintf("sources[%d].routes.%s", i, kind)
			if !contains(process.EffectKinds(), kind) {
				bad(p, "is not an effect kind a source produces ("+strings.Join(process.EffectKinds(), ", ")+")", quote(kind))
			}
			c.validateRoute(p, sinks, bad)
		}
	}
	if len(c.Sources) > 0 {
		for _, kind := range process.EffectKinds() {
			if _, ok := c.Routes[kind]; ok || process.OptionalKind(kind) {
				continue
			}
			// Routed by every source itself will do.
			for i, s := range c.Sources {
				if _, ok := s.Routes[kind]; !ok {
					bad("routes."+kind, "must be routed to a sink (or by "+fmt.Sprintf("sources[%d].routes", i)+")", `""`)
					break
				}
			}
		}
	}
	if c.Relay.Workers < 1 {
		bad("relay.workers", "must be at least 1", c.Relay.Workers)
	}
	if c.Relay.MaxAttempts < 1 {
		bad("relay.max_attempts", "must be at least 1", c.Relay.MaxAttempts)
	}
	if c.Relay.Backoff.Base <= 0 || c.Relay.Backoff.Max < c.Relay.Backoff.Base {
		bad("relay.backoff", "base must be positive and max at least base", fmt.Sprintf("base %s, max %s", c.Relay.Backoff.Base, c.Relay.Backoff.Max))
	}
	if c.Relay.MaxAge <= 0 {
		bad("relay.max_age", "must be positive", c.Relay.MaxAge.D())
	}
	if c.Relay.Lease < Duration(time.Second) {
		bad("relay.lease", "must be at least 1s", c.Relay.Lease.D())
	}
	if err := store.ValidateRetention(c.Retention.Keys.D(), c.Retention.ReplayWindow.D()); err != nil {
		errs = append(errs, err.Error())
	}
	switch r := c.Retention; {
	case r.Payloads < r.ReplayWindow:
		bad("retention.payloads", fmt.Sprintf("must be at least retention.replay_window (%s)", r.ReplayWindow.D()), r.Payloads.D())
	case r.Payloads > r.Keys:
		bad("retention.payloads", fmt.Sprintf("must be at most retention.keys (%s)", r.Keys.D()), r.Payloads.D())
	}
	if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
		bad("http.listen", "must be host:port", quote(c.HTTP.Listen))
	}
	c.validateConsole(bad)
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error", quote(c.Log.Level))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// validateConsole checks the console's settings when it is configured:
// plain HTTP only on loopback unless allow_insecure says otherwise, since
// tokens and session cookies cross the wire.
func (c *Config) validateConsole(bad func(path, rule string, got any)) {
	cc := c.Console
	if !cc.Enabled() {
		if cc != (Console{}) {
			bad("console.listen", "must be set when other console keys are", `""`)
		}
		return
	}
	host, _, err := net.SplitHostPort(cc.Listen)
	if err != nil {
		bad("console.listen", "must be host:port", quote(cc.Listen))
	}
	if cc.TokenFile == "" {
		bad("console.token_file", "must be set: the viewers' token", `""`)
	}
	if (cc.TLSCertFile == "") != (cc.TLSKeyFile == "") {
		bad("console.tls_cert_file", "and console.tls_key_file must be set together",
			fmt.Sprintf("cert %q, key %q", cc.TLSCertFile, cc.TLSKeyFile))
	}
	if err == nil && !cc.TLS() && !loopback(host) && !cc.AllowInsecure {
		bad("console.listen", "must be a loopback address unless console.tls_cert_file and console.tls_key_file are set (or set console.allow_insecure: true)",
			quote(cc.Listen))
	}
}

// validateRoute checks the sinks a route names: at least one, each
// configured, none twice.
func (c *Config) validateRoute(p string, sinks []string, bad func(path, rule string, got any)) {
	if len(sinks) == 0 {
		bad(p, "must name a sink or a list of sinks", "[]")
	}
	for j, name := range sinks {
		if _, ok := c.Sinks[name]; !ok {
			bad(p, "must name a configured sink", quote(name))
		}
		if contains(sinks[:j], name) {
			bad(p, "names a sink twice", quote(name))
		}
	}
}

// validateSFTPSink checks the settings of a sink of type sftp.
func (c *Config) validateSFTPSink(p string, s Sink, bad func(path, rule string, got any)) {
	if s.URL != "" {
		bad(p+".url", "is for type http; an sftp sink has address and directory", quote(sink.RedactURL(s.URL)))
	}
	checkSFTPLogin(p, s.Address, s.User, s.PrivateKeyFile, s.PasswordFile, s.KnownHostsFile, bad)
	if s.Directory == "" {
		bad(p+".directory", "must name the directory files go to", `""`)
	}
	if s.TempSuffix == "" || strings.ContainsAny(s.TempSuffix, "/\\") {
		bad(p+".temp_suffix", "must be a non-empty suffix without path separators", quote(s.TempSuffix))
	}
	if err := sftpsink.CheckPattern(s.Name); err != nil {
		bad(p+".name", err.Error(), quote(s.Name))
	} else if err := sftpsink.CheckNameLength(s.Name, s.TempSuffix, !s.Rename); err != nil {
		bad(p+".name", err.Error(), quote(s.Name))
	}
	if s.Raw || s.SecretFile != "" || len(s.HeaderFiles) > 0 {
		bad(p, "raw, secret_file and header_files are for type http", quote(s.Type))
	}
}

// checkSFTPLogin checks what an SFTP source or sink at p connects with:
// its address, a user, a key or password file, and known hosts (unknown
// host keys are refused).
func checkSFTPLogin(p, address, user, keyFile, passwordFile, knownHosts string, bad func(path, rule string, got any)) {
	checkAddress(p+".address", address, bad)
	if user == "" {
		bad(p+".user", "must be set for sftp", `""`)
	}
	if keyFile == "" && passwordFile == "" {
		bad(p+".private_key_file", "sftp needs private_key_file or password_file", `""`)
	}
	if knownHosts == "" {
		bad(p+".known_hosts_file", "is required: unknown host keys are refused", `""`)
	}
}

// checkAddress checks an SFTP address: host:port, with no user or
// password in it (user and password_file hold them); one that has them is
// refused without being shown.
func checkAddress(p, addr string, bad func(path, rule string, got any)) {
	if strings.Contains(addr, "@") {
		bad(p, "must be host:port, without a user or password (set user, and password_file or private_key_file)", "[redacted]")
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		bad(p, "must be host:port", quote(addr))
	}
}

// validateDecrypt checks a source's decrypt settings: the key files are
// paths (never inline keys), and what needs our private key has it.
func validateDecrypt(p string, s Source, bad func(path, rule string, got any)) {
	d := s.Decrypt
	if d.PrivateKeyFile == "" && (d.PassphraseFile != "" || d.VerifyKeyFile != "") {
		bad(p+".decrypt.private_key_file", "must be set when decrypt names a passphrase_file or verify_key_file", `""`)
	}
	if s.RequireEncryption && d.PrivateKeyFile == "" {
		bad(p+".require_encryption", "needs decrypt.private_key_file", true)
	}
	for _, f := range []struct{ k, v string }{{"private_key_file", d.PrivateKeyFile},
		{"passphrase_file", d.PassphraseFile}, {"verify_key_file", d.VerifyKeyFile}} {
		if inlineKey(f.v) {
			bad(p+".decrypt."+f.k, "must be a file path, never the key or passphrase itself", `"[redacted]"`)
		}
	}
}

// validatePGPSink checks a sink's encrypt_to and sign_with.
func validatePGPSink(p string, s Sink, bad func(path, rule string, got any)) {
	if s.Type != "sftp" && (s.EncryptTo != "" || s.SignWith.PrivateKeyFile != "" || s.SignWith.PassphraseFile != "") {
		bad(p+".encrypt_to", "encrypt_to and sign_with are for type sftp", quote(s.Type))
		return
	}
	if s.SignWith.PrivateKeyFile != "" && s.EncryptTo == "" {
		bad(p+".sign_with", "needs encrypt_to (files are signed and encrypted)", quote(s.SignWith.PrivateKeyFile))
	}
	if s.SignWith.PassphraseFile != "" && s.SignWith.PrivateKeyFile == "" {
		bad(p+".sign_with.private_key_file", "must be set when sign_with names a passphrase_file", `""`)
	}
	for _, f := range []struct{ k, v string }{{"encrypt_to", s.EncryptTo},
		{"sign_with.private_key_file", s.SignWith.PrivateKeyFile}, {"sign_with.passphrase_file", s.SignWith.PassphraseFile}} {
		if inlineKey(f.v) {
			bad(p+"."+f.k, "must be a file path, never the key or passphrase itself", `"[redacted]"`)
		}
	}
}

// inlineKey reports whether a value meant as a file path looks like a key
// (armor) or holds a line break: a secret pasted inline.
func inlineKey(v string) bool {
	return strings.Contains(v, "-----BEGIN") || strings.ContainsAny(v, "\r\n")
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func validName(s string) bool { return nameRE.MatchString(s) }

func quote(s string) string { return strconv.Quote(s) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
