// Package poller watches drops: it lists each configured directory of a
// source once per poll, diffs the listing against the store's ledger in
// one query, takes files whose size and mtime have been stable (and, when
// configured, that are old enough and have their done marker), downloads
// them into unlinked spool files with SHA-256 computed on the way, ingests
// each in one transaction, and only then deletes or moves them.
//
// A file that will be deleted or moved is first claimed: its done marker
// (when configured), then the file, renamed to processing names
// (NAME.done.ediwatch-<id>, NAME.ediwatch-<id>) in its directory, so a new
// file or marker the partner uploads under the same names meanwhile is
// never touched. The claimed file is then checked against the version
// listed; another version is handed back (file, then marker) and left for
// a later poll. A crash between the two claims (or the two hand-backs)
// leaves a claimed marker alone, which the next poll hands back; a crash
// after both leaves the pair, which the next poll finishes together. Where
// the server refuses the rename, the file's and marker's identities are
// checked again right before they are deleted or moved, and a changed one
// is left for the next poll. Processing names are matched by their
// original name's include and exclude, so sources sharing a directory
// leave each other's claims alone.
//
// Each (source, directory) is polled by one replica at a time through a
// store lease, renewed while the poll runs; the lease is a fence: its
// token goes into every ingest and is checked before post-processing, so
// a replica that lost its lease cannot commit or delete. When two replicas
// do download the same file, the inbox decides.
package poller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ediwatch/ediwatch/internal/backoff"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/journal"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/store"
)

// Store is what the poller needs of the store.
type Store interface {
	inbox.Ledger
	store.Leases
	inbox.Ingester
	store.PollRecorder
}

// Config is one source's polling configuration.
type Config struct {
	Name            string
	Directories     []string
	Include         []string // globs on the base name; default all
	Exclude         []string
	PollInterval    time.Duration
	StableFor       time.Duration
	After           string // leave, delete, move:DIR
	MaxFilesPerPoll int
	MaxFileSize     int64
	MaxAttempts     int
	Downloads       int
	// Holder names this replica in leases.
	Holder string
	// LeaseTTL is how long a directory lease lasts without renewal: the
	// failover time when its holder dies (default 3 poll intervals, at
	// least 10 s). The holder takes it at each poll and renews it every
	// third of the TTL while the poll runs.
	LeaseTTL time.Duration
	// SpoolDir holds spool files (default the system temp dir). They are
	// unlinked as soon as created, so none survives a crash.
	SpoolDir string
	// RetryBase and RetryMax shape the backoff between attempts at a file
	// that failed (default 10s and 1h).
	RetryBase, RetryMax time.Duration
	// MinAge: a file is taken only once its mtime is at least this old
	// (by this host's clock).
	MinAge time.Duration
	// DoneMarker, when set, is the name of a sidecar file that must exist
	// before a file is taken, with {name} standing for the file's name
	// ("{name}.done", "{name}.ok"). Markers are never ingested; after:
	// delete or move: removes or moves a file's marker with it.
	DoneMarker string
	// IncompleteGrace: a file whose last interchange has no IEA and whose
	// mtime is younger than this is left for a later poll (default 10m;
	// negative: no grace, such a file is rejected at once).
	IncompleteGrace time.Duration
	// Decrypt, when set, opens the OpenPGP messages among the files
	// (internal/pgp): a message is decrypted (and verified) into a second
	// unlinked spool file, and only a message that passes every check is
	// ingested, as its plaintext. One that fails is recorded as rejected
	// with its reason (no acknowledgment: nothing was read) and counted in
	// ediwatch_files_decrypt_failed_total.
	Decrypt *pgp.Decrypter
	// WaitForStandbys, when set, returns nil once every commit the store
	// made so far is as durable as the operator's database promises
	// (store.wait_for_standbys: flushed by its standbys). A file's delete
	// or move, which cannot be undone, runs only after it has: a file whose
	// ingest a failover would roll back stays in the drop, recorded, and
	// is post-processed by a later poll once the standbys hold it. A poll
	// calls it once, after its ingests: ingest never waits for it.
	WaitForStandbys func(ctx context.Context) error
	// Journal, when set, records every file before it is deleted or
	// moved (poller.journal); a file whose line cannot be written stays.
	Journal *journal.Writer
}

// DefaultIncompleteGrace is the IncompleteGrace of a zero Config.
const DefaultIncompleteGrace = 10 * time.Minute

// Defaults returns the values New gives the fields of a Config left zero;
// the configuration's source defaults are these.
func Defaults() Config {
	return Config{Include: []string{"*"}, After: "leave", MaxFilesPerPoll: 1000, MaxFileSize: 1 << 30,
		MaxAttempts: 5, Downloads: 4, RetryBase: 10 * time.Second, RetryMax: time.Hour,
		IncompleteGrace: DefaultIncompleteGrace}
}

// Poller polls one source. Run it with Run; PollOnce is for tests and
// tools. It is not safe for concurrent polls of itself.
type Poller struct {
	cfg    Config
	src    Source
	st     Store
	ingest inbox.Options
	log    *zap.Logger
	m      *metrics.Metrics
	now    func() time.Time

	mu     sync.Mutex
	seen   map[string]map[string]observation // dir -> path -> observation
	leases map[string]int64                  // lease name -> fencing token held
	// final: dir -> path -> the size and mtime at which the ledger held
	// the file final (ingested or rejected) when this poller last listed
	// it, with After "leave". A final ledger row is never made non-final
	// for the same size and mtime (retention prunes only rows long
	// post-processed), so while the listing shows a file unchanged the
	// ledger is not asked about it again: a steady directory's poll is
	// its listing.
	final map[string]map[string]fileVersion
	// notRegular: dir -> path -> kind, of the entries that are not
	// regular files in dir's last listing (each logged once).
	notRegular map[string]map[string]string
	// verified: path -> the size and mtime at which an unclaimed file (the
	// server refuses renames) was found by its SHA-256 to be the version
	// the ledger holds ingested, and has not been deleted or moved yet:
	// while its post-processing fails, later polls retry it without
	// downloading it again.
	verified map[string]fileVersion
	// behindUntil: after the standbys were found behind, the rest of the
	// files' post-processing is left for later without asking again
	// until then; heldSince is when they were first found behind (zero
	// while they are not); waiting counts the files left this poll.
	behindUntil, heldSince time.Time
	waiting                int
}

// fileVersion is a file's size and mtime as listed.
type fileVersion struct {
	size  int64
	mtime time.Time
}

// observation is a file's size and mtime as listed, and since when.
type observation struct {
	size  int64
	mtime time.Time
	since time.Time
	// incomplete: downloaded at this size and mtime, its last interchange
	// had no IEA.
	incomplete bool
}

// New returns a poller for src. ing.Store is set to st.
func New(cfg Config, src Source, st Store, ing inbox.Options, log *zap.Logger, m *metrics.Metrics) *Poller {
	d := Defaults()
	if len(cfg.Include) == 0 {
		cfg.Include = d.Include
	}
	if cfg.After == "" {
		cfg.After = d.After
	}
	if cfg.MaxFilesPerPoll <= 0 {
		cfg.MaxFilesPerPoll = d.MaxFilesPerPoll
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = d.MaxFileSize
	}
	if cfg.Decrypt != nil {
		// max_file_size bounds the plaintext too: a compression bomb is
		// refused once it passes it, not spooled until the disk is full.
		cfg.Decrypt = cfg.Decrypt.Limit(cfg.MaxFileSize)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = d.MaxAttempts
	}
	if cfg.Downloads <= 0 {
		cfg.Downloads = d.Downloads
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = max(3*cfg.PollInterval, 10*time.Second)
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = d.RetryBase
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = d.RetryMax
	}
	if cfg.Holder == "" {
		cfg.Holder = store.NewHolderID()
	}
	if cfg.IncompleteGrace == 0 {
		cfg.IncompleteGrace = d.IncompleteGrace
	}
	ing.Store = st
	return &Poller{cfg: cfg, src: src, st: st, ingest: ing, log: log.With(zap.String("source", cfg.Name)), m: m,
		now: func() time.Time { return time.Now().UTC() }, seen: map[string]map[string]observation{},
		leases: map[string]int64{}, final: map[string]map[string]fileVersion{}, verified: map[string]fileVersion{}}
}

// Reverify drops what this poller remembers of the ledger (files it
// found final, files it found ingested and not yet post-processed), so
// its next poll asks the store about every listed file again: after the
// database failed over to a server that may lack recent commits, a file
// whose ingestion that server does not have is ingested again, and one
// it does have is not.
func (p *Poller) Reverify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.final = map[string]map[string]fileVersion{}
	p.verified = map[string]fileVersion{}
}

// Run polls every PollInterval (with jitter) until ctx is cancelled, then
// returns nil. Poll errors are logged and counted; they do not stop it.
func (p *Poller) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	defer p.releaseLeases()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		start := time.Now()
		st, err := p.PollOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("poll failed", zap.Error(err))
		}
		p.log.Debug("polled", zap.Int("listed", st.Listed), zap.Int("downloaded", st.Downloaded),
			zap.Int("ingested", st.Ingested), zap.Int("skipped", st.Skipped), zap.Int("failed", st.Failed),
			zap.Int("deferred", st.Deferred))
		// At once again only when this poll moved the backlog on.
		t.Reset(nextPoll(p.cfg.PollInterval, time.Since(start), st.Deferred > 0 && st.Downloaded > 0 && err == nil))
	}
}

// nextPoll is how long after a poll that took took the next one starts:
// polls start every interval (±10%), the next at once when one overran
// it; when max_files_per_poll left files for it, a tenth of the interval
// (at most a second) later, so a backlog drains poll after poll rather
// than one batch an interval, while two listings still lie apart enough
// to tell a file being written from one at rest (stable_for: 0s).
func nextPoll(interval, took time.Duration, deferred bool) time.Duration {
	if deferred {
		return min(interval/10, time.Second)
	}
	return max(tenPercentAround(interval)-took, 0)
}

// releaseLeases gives up the directory leases this poller holds, so
// another replica takes over at once after a clean stop.
func (p *Poller) releaseLeases() {
	p.mu.Lock()
	held := p.leases
	p.leases = map[string]int64{}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for name, token := range held {
		if err := p.st.ReleaseLease(ctx, name, p.cfg.Holder, token); err != nil {
			p.log.Warn("release lease", zap.String("lease", name), zap.Error(err))
		}
	}
}

// tenPercentAround returns a random duration within d ± 10%, so replicas
// polling one drop spread out.
func tenPercentAround(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return backoff.Between(d-d/10, d+d/10)
}

// SetClock replaces the clock the poller reads (stable_for, min_age,
// incomplete_grace, leases and the times it records), as the relay's
// SetClock does: tests move time instead of waiting.
func (p *Poller) SetClock(now func() time.Time) { p.now = now }

// Stats counts what one poll did.
type Stats struct {
	Listed, Downloaded, Ingested, Skipped, Failed, PostProcessed int
	// Deferred counts the files left for the next poll by
	// max_files_per_poll (among Skipped).
	Deferred int
}

func (s *Stats) add(o Stats) {
	s.Deferred += o.Deferred
	s.Listed += o.Listed
	s.Downloaded += o.Downloaded
	s.Ingested += o.Ingested
	s.Skipped += o.Skipped
	s.Failed += o.Failed
	s.PostProcessed += o.PostProcessed
}

// PollOnce polls every directory once. A directory that fails is counted
// and reported; the others are still polled.
func (p *Poller) PollOnce(ctx context.Context) (Stats, error) {
	var total Stats
	var errs []error
	p.mu.Lock()
	p.waiting = 0
	p.mu.Unlock()
	defer p.setWaiting()
	for _, dir := range p.cfg.Directories {
		start := time.Now()
		st, err := p.pollDir(ctx, dir)
		p.m.PollDuration.WithLabelValues(p.cfg.Name).Observe(time.Since(start).Seconds())
		total.add(st)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dir, err))
		}
	}
	return total, errors.Join(errs...)
}

// setWaiting sets the gauges of the files whose post-processing waits
// for the standbys, as of the poll that just ended.
func (p *Poller) setWaiting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == 0 {
		p.heldSince = time.Time{} // nothing left waiting
	}
	held := 0.0
	if !p.heldSince.IsZero() {
		held = p.now().Sub(p.heldSince).Seconds()
	}
	p.m.PostProcessWaiting.WithLabelValues(p.cfg.Name).Set(float64(p.waiting))
	p.m.PostProcessWaitingSeconds.WithLabelValues(p.cfg.Name).Set(held)
}

type candidate struct {
	e      Entry  // the file as listed (a claimed file under its processing name)
	ledger string // the path the ledger knows it by: its original path
	name   string // its original base name
	// claimed: e is a processing name this poller's kind renamed it to;
	// claimID is the id in it, which its claimed done marker shares.
	claimed bool
	claimID string
	// marker is the file's done marker as listed (hasMarker), for the
	// identity check before an unclaimed file's marker is disposed of.
	marker    Entry
	hasMarker bool

	prev     inbox.FileState
	hasPrev  bool
	postOnly bool
	// ingested: the ledger holds the file read (ingested or rejected), at
	// its size and mtime, and not yet deleted or moved, but the file is not
	// claimed: it is that version only if its SHA-256 is the ledger's. (Post-processing may
	// have removed that version without being recorded; a new upload of
	// the same size and mtime is then another file.)
	ingested bool
}

// claimSuffix joins a file's name and its claim's correlation id in its
// processing name. Processing names never match a listing's globs and
// are recognised by claimName.
const claimSuffix = ".ediwatch-"

var claimName = regexp.MustCompile(`^(.+)\.ediwatch-([0-9a-f]{20})$`)

// errLeaseLost cancels a directory's poll when its lease could not be
// renewed.
var errLeaseLost = errors.New("directory lease lost")

func (p *Poller) pollDir(ctx context.Context, dir string) (Stats, error) {
	var st Stats
	lease := "poll:" + p.cfg.Name + ":" + dir
	token, ok, err := p.renew(ctx, lease)
	if err != nil {
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "lease").Inc()
		// Not recorded: without the lease this replica may not be the one
		// polling dir, and its holder's status is not this replica's to
		// overwrite (a store that cannot renew a lease is shown by the
		// status going stale).
		return st, fmt.Errorf("lease: %w", err)
	} else if !ok {
		return st, nil // another replica polls this directory
	}
	fence := inbox.Fence{Name: lease, Token: token}
	pctx, cancel := context.WithCancelCause(ctx)
	heartbeat := make(chan struct{})
	defer func() { <-heartbeat }()
	defer cancel(nil)
	go p.keepLease(pctx, fence, cancel, heartbeat)
	st, err = p.pollLeased(pctx, dir, fence)
	if cause := context.Cause(pctx); errors.Is(cause, errLeaseLost) {
		err = cause
	}
	p.recordPoll(ctx, dir, fence, err)
	if errors.Is(err, errListing) && ctx.Err() == nil {
		// This replica cannot list the drop (its route to the server, its
		// address, its DNS); another may. Renewed at every poll, the lease
		// would keep the directory from a replica that can: it is given
		// up, for whichever replica polls next.
		cancel(nil)
		<-heartbeat
		p.mu.Lock()
		delete(p.leases, lease)
		p.mu.Unlock()
		if rerr := p.st.ReleaseLease(ctx, lease, p.cfg.Holder, token); rerr != nil && ctx.Err() == nil {
			p.log.Warn("release lease", zap.String("lease", lease), zap.Error(rerr))
		}
	}
	return st, err
}

// errListing marks a poll that failed at its listing.
var errListing = errors.New("list")

// maxPollError bounds the poll error the store keeps.
const maxPollError = 500

// recordPoll records the end of a poll of dir in the store, for every
// replica's console: one statement per poll. pollErr is the error the
// poll is logged with (no secret, no patient data). A poll cut short by
// ctx (a shutdown) is not recorded, nor one whose lease another replica
// has taken since (the store refuses a stale fence).
func (p *Poller) recordPoll(ctx context.Context, dir string, fence inbox.Fence, pollErr error) {
	if ctx.Err() != nil {
		return
	}
	msg := ""
	if pollErr != nil {
		// The error may carry text the server chose (an SFTP status
		// message): control bytes are shown as U+FFFD, and PostgreSQL's
		// text refuses NUL (the poll would go unrecorded).
		msg = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return '\uFFFD'
			}
			return r
		}, strings.ToValidUTF8(pollErr.Error(), "\uFFFD"))
		if len(msg) > maxPollError {
			msg = strings.ToValidUTF8(msg[:maxPollError], "")
		}
	}
	if err := p.st.RecordPoll(ctx, p.cfg.Name, dir, p.cfg.Holder, fence, p.now(), msg); err != nil && ctx.Err() == nil {
		p.log.Warn("record poll", zap.String("directory", dir), zap.Error(err))
	}
}

// keepLease renews the lease every third of its TTL while the poll runs;
// when a renewal fails or finds the lease gone, it stops the poll.
func (p *Poller) keepLease(ctx context.Context, f inbox.Fence, cancel context.CancelCauseFunc, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(max(p.cfg.LeaseTTL/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		token, ok, err := p.renew(ctx, f.Name)
		if ctx.Err() != nil {
			return
		}
		if err == nil && ok && token == f.Token {
			continue
		}
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "lease").Inc()
		p.log.Warn("directory lease lost; poll stopped", zap.String("lease", f.Name), zap.Bool("held", ok), zap.Error(err))
		cancel(fmt.Errorf("%w: %s", errLeaseLost, f.Name))
		return
	}
}

// dropNotRegular returns the regular files of a listing of dir. Every
// other entry whose name the source's globs take (a directory, a
// symlink, a device) is counted in ediwatch_files_skipped_total under its
// kind at each listing, like a file known final, and logged once while
// its name stays listed; the directory files are moved to is not.
func (p *Poller) dropNotRegular(dir string, entries []Entry) []Entry {
	regular := entries[:0]
	var now map[string]string // path -> kind, of this listing
	moveTo, _ := strings.CutPrefix(p.cfg.After, "move:")
	for _, e := range entries {
		if e.Skip == "" {
			regular = append(regular, e)
			continue
		}
		if !p.matches(e.Name) || p.cfg.After != moveTo && path.Clean(e.Path) == path.Clean(moveTo) {
			continue
		}
		if now == nil {
			now = map[string]string{}
		}
		now[e.Path] = e.Skip
		p.m.FilesSkipped.WithLabelValues(p.cfg.Name, e.Skip).Inc()
	}
	p.mu.Lock()
	told := p.notRegular[dir]
	if now == nil {
		delete(p.notRegular, dir)
	} else {
		if p.notRegular == nil {
			p.notRegular = map[string]map[string]string{}
		}
		p.notRegular[dir] = now
	}
	p.mu.Unlock()
	for path, kind := range now {
		if told[path] != kind {
			p.log.Warn("entry skipped: not a regular file; it is never opened", zap.String("path", path),
				zap.String("kind", kind))
		}
	}
	return regular
}

func (p *Poller) pollLeased(ctx context.Context, dir string, fence inbox.Fence) (Stats, error) {
	var st Stats
	entries, err := p.src.List(ctx, dir)
	if err != nil {
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "list").Inc()
		return st, fmt.Errorf("%w: %w", errListing, err)
	}
	entries = p.dropNotRegular(dir, entries)
	// Names are looked up only to pair files with their done markers.
	var present map[string]Entry
	if p.cfg.DoneMarker != "" {
		present = make(map[string]Entry, len(entries))
	}
	for i := range entries {
		entries[i].MTime = entries[i].MTime.UTC().Truncate(time.Microsecond) // what the ledger can hold
		if present != nil {
			present[entries[i].Name] = entries[i]
		}
	}
	p.mu.Lock()
	final := p.final[dir]
	p.mu.Unlock()
	leave := p.cfg.After == "leave"
	// knownFinal: e matched before and the ledger held it final at this
	// size and mtime (processing names are never in final).
	knownFinal := func(e Entry) bool {
		v, ok := final[e.Path]
		return ok && v.size == e.Size && v.mtime.Equal(e.MTime) && !strings.Contains(e.Name, claimSuffix)
	}
	finalHits := 0
	// Candidates are large; files known final need none.
	matched := make([]candidate, 0, max(len(entries)-len(final), 16))
	// listed: the candidates' paths. A server may name a file twice in a
	// listing (overlapping pages); taken twice at once, its second ingest
	// would be a duplicate no partner sent.
	listed := make(map[string]struct{}, cap(matched))
	for _, e := range entries {
		if final != nil && knownFinal(e) {
			finalHits++ // skipped below, with no more work than this
			continue
		}
		c := candidate{e: e, ledger: ledgerPath(e.Path), name: e.Name}
		var m []string
		if strings.Contains(e.Name, claimSuffix) { // most names are not: no regexp for them
			m = claimName.FindStringSubmatch(e.Name)
		}
		if m != nil {
			if file, ok := p.markedFile(m[1]); ok {
				// A claimed done marker; alone, a crash cut its claim short.
				if _, paired := present[file+claimSuffix+m[2]]; !paired && p.matches(file) {
					p.handBackMarker(ctx, e.Path, path.Join(path.Dir(e.Path), m[1]))
				}
				continue
			}
			if !p.matches(m[1]) {
				continue // another source's claim
			}
			c.name, c.claimID, c.claimed = m[1], m[2], true
			c.ledger = ledgerPath(path.Join(path.Dir(e.Path), c.name))
		} else if p.isMarker(e.Name) || !p.matches(e.Name) {
			continue
		} else if p.cfg.DoneMarker != "" {
			c.marker, c.hasMarker = present[p.marker(e.Name)]
		}
		if _, twice := listed[e.Path]; twice {
			continue
		}
		listed[e.Path] = struct{}{}
		matched = append(matched, c)
	}
	st.Listed = len(matched) + finalHits
	p.m.FilesListed.WithLabelValues(p.cfg.Name).Add(float64(st.Listed))
	paths := make([]string, len(matched))
	for i := range matched {
		paths[i] = matched[i].ledger
	}
	var states map[string]inbox.FileState
	if len(paths) > 0 {
		states, err = p.st.FileStates(ctx, p.cfg.Name, paths)
		if err != nil {
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "ledger").Inc()
			return st, fmt.Errorf("ledger: %w", err)
		}
	}
	now := p.now()
	var todo []candidate
	// Skips are counted per reason and added to the metric once.
	skipped := map[string]int{}
	skip := func(reason string) {
		st.Skipped++
		skipped[reason]++
	}
	defer func() {
		for reason, n := range skipped {
			p.m.FilesSkipped.WithLabelValues(p.cfg.Name, reason).Add(float64(n))
		}
	}()
	for range finalHits {
		skip("final")
	}
	// keptFinal is final less the files gone from the listing or changed.
	keptFinal := func(extra int) map[string]fileVersion {
		kept := make(map[string]fileVersion, finalHits+extra)
		for _, e := range entries {
			if final != nil && knownFinal(e) {
				kept[e.Path] = fileVersion{e.Size, e.MTime}
			}
		}
		return kept
	}
	// nextFinal is final unless a file went or became final.
	var nextFinal map[string]fileVersion
	markFinal := func(c *candidate) {
		if !leave || c.claimed {
			return
		}
		if nextFinal == nil {
			nextFinal = keptFinal(len(matched))
		}
		nextFinal[c.e.Path] = fileVersion{c.e.Size, c.e.MTime}
	}
	p.mu.Lock()
	obs := p.seen[dir]
	next := make(map[string]observation, len(obs)) // files not final yet: few
	for i := range matched {
		c := &matched[i] // candidates are large: not copied for a skip
		e := c.e
		prev, has := states[c.ledger]
		same := has && prev.Size == e.Size && prev.MTime.Equal(e.MTime)
		// read: the ledger's version was read, ingested or rejected, and so
		// is post-processed (one rejected unread, over max_file_size, is
		// left where it is).
		read := prev.Status == inbox.FileIngested || prev.Status == inbox.FileRejected && prev.SHA256 != ""
		if same && read && prev.PostDone && p.cfg.After != "leave" {
			// Post-processing removed the version the ledger describes, so
			// this one is another version with the same size and mtime.
			same = false
		}
		switch {
		case same && (prev.Status == inbox.FileIngested || prev.Status == inbox.FileRejected):
			if read && p.cfg.After != "leave" && !prev.PostDone {
				c.prev, c.hasPrev = prev, true
				v, ok := p.verified[e.Path]
				c.postOnly = c.claimed || ok && v.size == e.Size && v.mtime.Equal(e.MTime)
				c.ingested = !c.postOnly
				todo = append(todo, *c)
			} else {
				markFinal(c)
				skip("final")
			}
			continue
		case same && prev.Status == inbox.FileFailed:
			skip("failed")
			continue
		case same && prev.Status == inbox.FileRetrying && now.Before(prev.UpdatedAt.Add(p.retryDelay(prev.Attempts))):
			skip("backoff")
			next[e.Path] = obs[e.Path]
			continue
		}
		if e.Size > p.cfg.MaxFileSize {
			p.record(ctx, c.ledger, e, inbox.FileRejected, fmt.Sprintf("larger than max_file_size (%d > %d bytes)", e.Size, p.cfg.MaxFileSize), "")
			p.m.FilesFailed.WithLabelValues(p.cfg.Name, "too_large").Inc()
			st.Failed++
			continue
		}
		o, seenBefore := obs[e.Path]
		if !seenBefore || o.size != e.Size || !o.mtime.Equal(e.MTime) {
			next[e.Path] = observation{size: e.Size, mtime: e.MTime, since: now}
			skip("unstable")
			continue
		}
		next[e.Path] = o
		switch {
		case now.Sub(o.since) < p.cfg.StableFor:
			skip("unstable")
			continue
		case now.Sub(e.MTime) < p.cfg.MinAge:
			skip("too_young")
			continue
		case !c.claimed && p.cfg.DoneMarker != "" && !c.hasMarker:
			skip("no_marker")
			continue
		case o.incomplete && p.young(e):
			skip("incomplete")
			continue
		}
		c.prev, c.hasPrev = prev, same
		todo = append(todo, *c)
	}
	p.seen[dir] = next
	switch {
	case nextFinal != nil:
		p.final[dir] = nextFinal
	case finalHits < len(final):
		p.final[dir] = keptFinal(0) // some files known final are gone or changed
	}
	p.mu.Unlock()
	if len(todo) > p.cfg.MaxFilesPerPoll {
		for range todo[p.cfg.MaxFilesPerPoll:] {
			skip("limit")
			st.Deferred++
		}
		todo = todo[:p.cfg.MaxFilesPerPoll]
	}
	var mu sync.Mutex
	// Where the standbys must hold a file's commit before it goes, its
	// delete or move waits for the poll's ingests to end: the poll then
	// waits for the standbys once for all its files (postDeferred), and
	// no ingest waits for them.
	var later *deferred
	gctx := ctx
	if p.cfg.WaitForStandbys != nil {
		later = &deferred{}
		gctx = context.WithValue(ctx, deferredKey{}, later)
	}
	g, gctx := errgroup.WithContext(gctx)
	g.SetLimit(p.cfg.Downloads)
	for _, c := range todo {
		g.Go(func() error {
			var s Stats
			if c.postOnly {
				if p.postProcess(gctx, c, c.e, fence) {
					s.PostProcessed++
				}
			} else {
				s = p.take(gctx, dir, c, fence)
			}
			mu.Lock()
			st.add(s)
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	st.PostProcessed += p.postDeferred(ctx, later)
	return st, ctx.Err()
}

// deferred holds the deletes and moves of a poll's files left until its
// ingests end (postProcess, when it may not run before the standbys hold
// the commit).
type deferred struct {
	mu    sync.Mutex
	steps []func(context.Context) bool
}

func (d *deferred) add(step func(context.Context) bool) {
	d.mu.Lock()
	d.steps = append(d.steps, step)
	d.mu.Unlock()
}

// deferredKey carries a poll's *deferred in its files' contexts;
// heldKey marks the context of a deferred step, run once the standbys
// were found to hold every commit so far.
type (
	deferredKey struct{}
	heldKey     struct{}
)

// postDeferred waits once for the standbys to hold every commit so far
// and then runs the deferred steps, as many at once as the poll's
// downloads; it returns how many post-processed their file. While the
// standbys do not hold them, every deferred file stays for a later poll,
// counted as waiting.
func (p *Poller) postDeferred(ctx context.Context, d *deferred) int {
	if d == nil || len(d.steps) == 0 || ctx.Err() != nil {
		return 0
	}
	if !p.standbysHold(ctx, p.log) {
		p.mu.Lock()
		p.waiting += len(d.steps) - 1 // standbysHold counted one
		p.mu.Unlock()
		return 0
	}
	held := context.WithValue(ctx, heldKey{}, true)
	var done atomic.Int64
	g := new(errgroup.Group)
	g.SetLimit(p.cfg.Downloads)
	for _, step := range d.steps {
		g.Go(func() error {
			if step(held) {
				done.Add(1)
			}
			return nil
		})
	}
	g.Wait()
	return int(done.Load())
}

// ledgerPath is the path the store knows the file at p by: p itself when
// it is UTF-8, as names almost always are; else p with each byte that is
// not UTF-8 written \xNN (a partner naming files in Latin-1), since
// PostgreSQL's text holds only UTF-8 and one such name would fail the
// directory's ledger query, and with it every poll of the directory.
func ledgerPath(p string) string {
	if utf8.ValidString(p) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRuneInString(p[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02X`, p[i])
		} else {
			b.WriteString(p[i : i+n])
		}
		i += n
	}
	return b.String()
}

// young reports whether e is within the incomplete grace.
func (p *Poller) young(e Entry) bool {
	return p.cfg.IncompleteGrace > 0 && p.now().Sub(e.MTime) < p.cfg.IncompleteGrace
}

// marker returns the done marker's name for the file name.
func (p *Poller) marker(name string) string {
	return strings.ReplaceAll(p.cfg.DoneMarker, "{name}", name)
}

// isMarker reports whether name has the form of a done marker.
func (p *Poller) isMarker(name string) bool {
	_, ok := p.markedFile(name)
	return ok
}

// markedFile returns the name of the file whose done marker is named
// name, and whether name has the form of a done marker.
func (p *Poller) markedFile(name string) (string, bool) {
	if p.cfg.DoneMarker == "" {
		return "", false
	}
	prefix, suffix, _ := strings.Cut(p.cfg.DoneMarker, "{name}")
	if len(name) > len(prefix)+len(suffix) && strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) {
		return name[len(prefix) : len(name)-len(suffix)], true
	}
	return "", false
}

// handBackMarker renames a claimed done marker back to its name, unless a
// marker of that name exists: then the claimed one belongs to a version
// that is gone, and is deleted.
func (p *Poller) handBackMarker(ctx context.Context, claimed, to string) {
	ctx = context.WithoutCancel(ctx) // never leave a marker half handed back
	err := p.src.Rename(ctx, claimed, to)
	if errors.Is(err, os.ErrExist) {
		err = p.src.Remove(ctx, claimed)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "claim").Inc()
		p.log.Warn("claimed done marker not handed back; retried next poll", zap.String("marker", claimed), zap.Error(err))
	}
}

// renew takes or extends the lease for this poller; it reports the token
// and whether this poller holds it.
func (p *Poller) renew(ctx context.Context, lease string) (int64, bool, error) {
	token, ok, err := p.st.AcquireLease(ctx, lease, p.cfg.Holder, p.cfg.LeaseTTL, p.now())
	if err != nil || !ok {
		return 0, false, err
	}
	p.mu.Lock()
	p.leases[lease] = token
	p.mu.Unlock()
	return token, true, nil
}

func (p *Poller) matches(name string) bool {
	ok := false
	for _, g := range p.cfg.Include {
		if m, _ := path.Match(g, name); m {
			ok = true
			break
		}
	}
	for _, g := range p.cfg.Exclude {
		if m, _ := path.Match(g, name); m {
			return false
		}
	}
	return ok
}

// retryDelay is the backoff before attempt attempts+1 at a failed file.
func (p *Poller) retryDelay(attempts int) time.Duration {
	return backoff.Capped(p.cfg.RetryBase, p.cfg.RetryMax, attempts)
}

// take claims, downloads, ingests and post-processes one file.
func (p *Poller) take(ctx context.Context, dir string, c candidate, fence inbox.Fence) Stats {
	var st Stats
	e := c.e
	// A fresh correlation id per arrival, also for a file claimed by an
	// earlier attempt: its processing name only names the claim.
	corr := store.NewCorrelationID()
	log := p.log.With(zap.String("path", c.ledger), zap.String("correlation_id", corr))
	vanished := func() Stats {
		// Deleted between the listing and the download (by the partner or
		// another replica's post-processing): nothing to take, no failure.
		st.Skipped++
		p.m.FilesSkipped.WithLabelValues(p.cfg.Name, "vanished").Inc()
		log.Info("file vanished before download")
		return st
	}
	// Claim first: what is downloaded, ingested and then deleted or moved
	// is the claimed file and marker, whatever the partner puts under
	// their names meanwhile.
	claimedNow := false
	if !c.claimed && p.cfg.After != "leave" {
		got, err := p.claim(ctx, c, corr)
		left := func(reason, msg string) Stats {
			p.forget(dir, e.Path) // stable again before it is taken
			st.Skipped++
			p.m.FilesSkipped.WithLabelValues(p.cfg.Name, reason).Inc()
			log.Info(msg)
			return st
		}
		switch {
		case err == nil:
			c.claimed, c.claimID, claimedNow, e = true, corr, true, got
		case errors.Is(err, errMarkerGone):
			return left("no_marker", "done marker gone since listed; file left for a later poll")
		case errors.Is(err, errReplaced):
			return left("replaced", "file replaced since listed; handed back, taken on a later poll")
		case errors.Is(err, os.ErrNotExist):
			return vanished()
		case ctx.Err() != nil:
			return st
		case errors.Is(err, errClaimRefused):
			// The server refuses the rename: post-processing re-checks the
			// file's identity instead.
			log.Debug("claim by rename refused; identity checked before post-processing", zap.Error(err))
		default:
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "claim").Inc()
			log.Warn("claim not verified; retried next poll", zap.Error(err))
			st.Skipped++
			return st
		}
	}
	if c.claimed {
		log = log.With(zap.String("processing_path", e.Path))
	}
	spool, sum, n, err := p.download(ctx, e)
	if errors.Is(err, os.ErrNotExist) {
		return vanished()
	}
	if err != nil {
		if ctx.Err() != nil {
			return st
		}
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "download").Inc()
		p.fail(ctx, c, fence, "download", err, log)
		st.Failed++
		return st
	}
	defer spool.Close()
	st.Downloaded++
	p.m.FilesDownloaded.WithLabelValues(p.cfg.Name).Inc()
	p.m.BytesDownloaded.WithLabelValues(p.cfg.Name).Add(float64(n))
	if n != e.Size {
		// Changed while downloading: it is not stable after all.
		p.forget(dir, e.Path)
		log.Info("file changed during download; retried when stable", zap.Int64("listed", e.Size), zap.Int64("read", n))
		return st
	}
	if c.ingested && c.prev.SHA256 == sum {
		// The version ingested: only its post-processing is left.
		log.Info("file already ingested; post-processing it", zap.String("sha256", sum))
		if !c.claimed {
			p.mu.Lock()
			p.verified[e.Path] = fileVersion{e.Size, e.MTime}
			p.mu.Unlock()
		}
		if p.postProcess(ctx, c, e, fence) {
			st.PostProcessed++
		}
		return st
	}
	// The plaintext: the spool itself, or the decrypted message.
	plain, plainSize, refused := spool, n, ""
	if p.cfg.Decrypt != nil {
		pt, size, err := p.cfg.Decrypt.SpoolWarn(ctx, spool, p.cfg.SpoolDir, func(msg string) { log.Warn(msg) })
		switch refused = pgp.ReasonOf(err); {
		case err == nil:
			if pt != spool {
				defer pt.Close()
				// The ciphertext is not needed any more.
				spool.Close()
			}
			plain, plainSize = pt, size
		case refused == "":
			if ctx.Err() != nil {
				return st
			}
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "decrypt").Inc()
			p.fail(ctx, c, fence, "decrypt", err, log)
			st.Failed++
			return st
		case pgp.IsCutOff(err) && p.young(e):
			// A message that ends early: a stalled upload, most likely;
			// as an interchange without its IEA, left for a later poll.
			// A damaged one (an integrity check failed) is refused at
			// once.
		default:
			p.refuse(ctx, c, e, fence, sum, err, log)
			st.Failed++
			return st
		}
	}
	if p.young(e) && (refused != "" || lastInterchangeOpen(plain, plainSize)) {
		// A stalled upload, most likely: handed back under its name (so a
		// partner resuming it finds it) and taken again when it changes or
		// the grace has passed (then rejected as it is).
		at := e.Path
		if claimedNow && p.src.Rename(context.WithoutCancel(ctx), e.Path, c.e.Path) == nil {
			at = c.e.Path
			p.handBackClaimedMarker(ctx, c)
		}
		p.mu.Lock()
		if o, ok := p.seen[dir][at]; ok && o.size == e.Size && o.mtime.Equal(e.MTime) {
			o.incomplete = true
			p.seen[dir][at] = o
		}
		p.mu.Unlock()
		st.Skipped++
		p.m.FilesSkipped.WithLabelValues(p.cfg.Name, "incomplete").Inc()
		msg := "last interchange has no IEA; left for a later poll"
		if refused != "" {
			msg = "OpenPGP message cut off; left for a later poll"
		}
		log.Info(msg, zap.Duration("incomplete_grace", p.cfg.IncompleteGrace))
		return st
	}
	// Size and SHA-256 are the bytes received; keys and content hashes
	// those of the plaintext.
	res, err := inbox.Ingest(ctx, p.ingest, inbox.FileInfo{Source: p.cfg.Name, Path: c.ledger, Size: n, MTime: e.MTime,
		SHA256: sum, CorrelationID: corr, Now: p.now(), Fence: fence}, plain)
	if err != nil {
		if ctx.Err() != nil {
			return st
		}
		if errors.Is(err, store.ErrLeaseLost) {
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "lease").Inc()
			log.Warn("ingest refused: the directory lease passed to another replica", zap.Error(err))
			return st
		}
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "ingest").Inc()
		p.fail(ctx, c, fence, "ingest", err, log)
		st.Failed++
		return st
	}
	st.Ingested++
	fields := []zap.Field{zap.String("sha256", sum), zap.Bool("x12", res.X12)}
	for _, o := range []inbox.Outcome{inbox.Processed, inbox.Duplicate, inbox.BusinessDuplicate, inbox.Conflict, inbox.Rejected} {
		if n := res.Count(o); n > 0 {
			p.m.Sets.WithLabelValues(string(o)).Add(float64(n))
			fields = append(fields, zap.Int(string(o), n))
		}
	}
	for code, n := range res.Warnings {
		p.m.X12Warnings.WithLabelValues(code).Add(float64(n))
	}
	for _, s := range res.Sets {
		if s.Unbalanced && s.Outcome == inbox.Processed {
			p.m.Unbalanced.Inc()
		}
		switch {
		case s.Outcome == inbox.Conflict && len(s.ConflictKeys) > 0:
			// Effect keys name payer and trace, or a digest of a claim's
			// identity: no patient data.
			log.Warn("effect conflict: an effect key already posted with other content; not posted",
				zap.String("key", s.Key), zap.Strings("conflicting_effects", s.ConflictKeys),
				zap.String("original_correlation_id", s.OriginalCorrelationID))
		case s.Outcome == inbox.Conflict:
			log.Warn("key conflict: same envelope key, other content; quarantined", zap.String("key", s.Key),
				zap.String("original_correlation_id", s.OriginalCorrelationID))
		}
	}
	log.Info("file ingested", fields...)
	c.prev.SHA256 = sum // the version ingested, for the journal
	if p.postProcess(ctx, c, e, fence) {
		st.PostProcessed++
	}
	return st
}

// refuse records the file refused by OpenPGP (err is a *pgp.Error) as
// rejected, with its reason, and post-processes it as any rejected file;
// nothing of it is ingested, no acknowledgment is built. The log names the
// file and the reason, never content or keys.
func (p *Poller) refuse(ctx context.Context, c candidate, e Entry, fence inbox.Fence, sum string, err error,
	log *zap.Logger) {
	reason := pgp.ReasonOf(err)
	p.m.FilesDecryptFailed.WithLabelValues(p.cfg.Name, reason).Inc()
	if err := p.st.CheckLease(ctx, fence, p.now()); err != nil {
		if ctx.Err() == nil {
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "lease").Inc()
			log.Warn("rejection left to the lease's new holder", zap.Error(err))
		}
		return
	}
	p.record(ctx, c.ledger, e, inbox.FileRejected, "decrypt: "+err.Error(), sum)
	log.Warn("file rejected: OpenPGP", zap.String("reason", reason), zap.String("sha256", sum), zap.Error(err))
	c.prev.SHA256 = sum
	p.postProcess(ctx, c, e, fence)
}

// forget drops the observation of path, so it must be stable again.
func (p *Poller) forget(dir, path string) {
	p.mu.Lock()
	delete(p.seen[dir], path)
	p.mu.Unlock()
}

var (
	// errMarkerGone: a file's done marker vanished between the listing
	// and the claim (the partner is replacing the file, most likely).
	errMarkerGone = errors.New("done marker gone since listed")
	// errReplaced: the claimed file is not the version listed.
	errReplaced = errors.New("file replaced since listed")
	// errClaimRefused: the server refuses renames.
	errClaimRefused = errors.New("claim by rename refused")
)

// claim claims the listed file c.e under id: its done marker first (when
// configured: a marker claimed is one the partner wrote after the file it
// marks, so the next upload's marker is never taken), then the file. It
// returns the claimed file once checked to be the version listed. Any
// error leaves nothing claimed (the claimed file, then its marker, is
// handed back), except a claimed file that cannot be handed back (its name
// holds a newer file already): it stays claimed with its marker and is
// finished with it once stable.
func (p *Poller) claim(ctx context.Context, c candidate, id string) (Entry, error) {
	dir := path.Dir(c.e.Path)
	if p.cfg.DoneMarker != "" {
		m := path.Join(dir, p.marker(c.name))
		if err := p.src.Rename(ctx, m, m+claimSuffix+id); errors.Is(err, os.ErrNotExist) {
			return Entry{}, errMarkerGone
		} else if err != nil {
			return Entry{}, fmt.Errorf("%w: %w", errClaimRefused, err)
		}
	}
	c.claimID = id
	to := path.Join(dir, c.name+claimSuffix+id)
	if err := p.src.Rename(ctx, c.e.Path, to); err != nil {
		p.handBackClaimedMarker(ctx, c)
		if errors.Is(err, os.ErrNotExist) {
			return Entry{}, err
		}
		return Entry{}, fmt.Errorf("%w: %w", errClaimRefused, err)
	}
	got, err := p.src.Stat(ctx, to)
	if err == nil {
		got.MTime = got.MTime.UTC().Truncate(time.Microsecond)
		if got.Same(c.e) {
			return got, nil
		}
		err = errReplaced
	}
	// Not the version judged stable (or not known to be): hand it back
	// under its name, for the partner to finish and a later poll to take.
	switch back := p.src.Rename(context.WithoutCancel(ctx), to, c.e.Path); {
	case back == nil || errors.Is(back, os.ErrNotExist):
		p.handBackClaimedMarker(ctx, c)
	default:
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "claim").Inc()
		p.log.Warn("claimed file not handed back; finished with its marker once stable",
			zap.String("path", c.ledger), zap.String("processing_path", to), zap.Error(back))
	}
	return Entry{}, fmt.Errorf("verify claim: %w", err)
}

// handBackClaimedMarker hands back the done marker claimed with c.
func (p *Poller) handBackClaimedMarker(ctx context.Context, c candidate) {
	if p.cfg.DoneMarker == "" {
		return
	}
	m := path.Join(path.Dir(c.e.Path), p.marker(c.name))
	p.handBackMarker(ctx, m+claimSuffix+c.claimID, m)
}

func isAlnum(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z'
}

// closingIEA matches a whole IEA segment at the very end of a file: any
// delimiters (each interchange may use its own), optional padding, a
// segment terminator, then only white space.
var closingIEA = regexp.MustCompile(`(?:^|[^A-Za-z0-9])IEA([^A-Za-z0-9\s]) *[A-Za-z0-9]{1,5} *([^A-Za-z0-9\s]) *[A-Za-z0-9 ]{1,9}[^A-Za-z0-9 ]\s*$`)

func endsWithIEA(b []byte) bool {
	m := closingIEA.FindSubmatch(b)
	return m != nil && bytes.Equal(m[1], m[2])
}

// lastInterchangeOpen reports whether the X12 in r (size bytes) ends
// without an IEA: a cheap look at the file's start and its last bytes,
// not a parse. Content that is not X12 is not open.
func lastInterchangeOpen(r io.ReaderAt, size int64) bool {
	head := make([]byte, min(size, 512))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	head = bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(head) < 4 && bytes.HasPrefix([]byte("ISA"), head) {
		// Empty, or not past "ISA" yet: an upload stalled at its first
		// bytes (rejected as it is once the grace has passed).
		return true
	}
	if len(head) < 4 || !bytes.HasPrefix(head, []byte("ISA")) || isAlnum(head[3]) {
		return false // not X12
	}
	if bytes.Count(head, head[3:4]) < 16 {
		// Too short to hold its ISA: an upload that has just begun (or
		// not X12, rejected once the grace has passed).
		return true
	}
	tail := make([]byte, min(size, 256))
	if _, err := r.ReadAt(tail, size-int64(len(tail))); err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	tail = bytes.ReplaceAll(tail, []byte("\r"), nil)
	// Lines wrapped at a fixed width may split the IEA itself.
	return !endsWithIEA(tail) && !endsWithIEA(bytes.ReplaceAll(tail, []byte("\n"), nil))
}

// download streams the file into an unlinked spool file, hashing it on the
// way. At most MaxFileSize+1 bytes are read.
func (p *Poller) download(ctx context.Context, e Entry) (*os.File, string, int64, error) {
	rc, err := p.src.Open(ctx, e.Path)
	if err != nil {
		return nil, "", 0, err
	}
	defer rc.Close()
	spool, err := os.CreateTemp(p.cfg.SpoolDir, "ediwatch-spool-*")
	if err != nil {
		return nil, "", 0, fmt.Errorf("spool: %w", err)
	}
	// Unlinked now: the spool lives only as long as this descriptor, so
	// no crash can leave one behind.
	if err := os.Remove(spool.Name()); err != nil {
		spool.Close()
		return nil, "", 0, fmt.Errorf("spool: %w", err)
	}
	h := sha256.New()
	// io.Copy hands the writer to the source's WriteTo, so an SFTP file is
	// fetched with concurrent reads; the cap stops a file that outgrew
	// max_file_size since its listing.
	w := &capWriter{w: io.MultiWriter(spool, h), left: p.cfg.MaxFileSize + 1}
	n, err := io.Copy(w, rc)
	if errors.Is(err, errTooLarge) {
		err = nil // n differs from the listed size: not stable
	}
	if err == nil {
		_, err = spool.Seek(0, io.SeekStart)
	}
	if err != nil {
		spool.Close()
		return nil, "", 0, err
	}
	return spool, hex.EncodeToString(h.Sum(nil)), n, nil
}

var errTooLarge = errors.New("file outgrew max_file_size")

// capWriter writes at most left bytes, then fails.
type capWriter struct {
	w    io.Writer
	left int64
}

func (c *capWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > c.left {
		n, _ := c.w.Write(b[:c.left])
		c.left = 0
		return n, errTooLarge
	}
	n, err := c.w.Write(b)
	c.left -= int64(n)
	return n, err
}

// fail records a failed attempt: retried on later polls with backoff, or,
// after MaxAttempts, failed for good. Only while this poller holds the
// directory lease: a replica that lost it may fail at a file the new
// holder has ingested since, and must not overwrite that ledger row.
func (p *Poller) fail(ctx context.Context, c candidate, fence inbox.Fence, stage string, err error, log *zap.Logger) {
	if lerr := p.st.CheckLease(ctx, fence, p.now()); lerr != nil {
		if ctx.Err() == nil {
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "lease").Inc()
			log.Warn("file not ingested; failure left unrecorded: the directory lease is not confirmed",
				zap.String("stage", stage), zap.Error(err), zap.NamedError("lease", lerr))
		}
		return
	}
	attempts := 1
	if c.hasPrev && c.prev.Status == inbox.FileRetrying {
		attempts = c.prev.Attempts + 1
	}
	status := inbox.FileRetrying
	if attempts >= p.cfg.MaxAttempts {
		status = inbox.FileFailed
		p.m.FilesFailed.WithLabelValues(p.cfg.Name, "gave_up").Inc()
	}
	p.m.FilesFailed.WithLabelValues(p.cfg.Name, stage).Inc()
	msg := stage + ": " + err.Error()
	p.record(ctx, c.ledger, c.e, status, msg, "")
	log.Warn("file not ingested", zap.String("stage", stage), zap.Error(err), zap.Int("attempt", attempts),
		zap.String("status", string(status)))
}

// record writes the ledger row of the file e, known as ledger.
// sum, when known, is the SHA-256 of the bytes received ("" when none
// were: the row never keeps an earlier version's).
func (p *Poller) record(ctx context.Context, ledger string, e Entry, status inbox.FileStatus, msg, sum string) {
	if _, err := p.st.RecordFileProblem(ctx, inbox.FileInfo{Source: p.cfg.Name, Path: ledger, Size: e.Size,
		MTime: e.MTime, SHA256: sum, Now: p.now()}, status, msg); err != nil {
		p.log.Error("ledger write failed", zap.String("path", ledger), zap.Error(err))
	}
}

// postProcess deletes or moves the version e of c whose ingest committed,
// and records it. It acts only while this poller holds the directory
// lease, and only on that exact version: a claimed file is its own; an
// unclaimed one is checked again (size, mtime, identity) right before and
// left for the next poll when it changed. A failure is counted and
// retried on a later poll; the file is never ingested again for it.
func (p *Poller) postProcess(ctx context.Context, c candidate, e Entry, fence inbox.Fence) bool {
	if p.cfg.After == "leave" {
		return false
	}
	log := p.log.With(zap.String("path", c.ledger))
	if err := p.st.CheckLease(ctx, fence, p.now()); err != nil {
		if ctx.Err() == nil {
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "lease").Inc()
			log.Warn("post-processing left to the lease's new holder", zap.Error(err))
		}
		return false
	}
	if !c.claimed {
		cur, err := p.src.Stat(ctx, e.Path)
		if err == nil {
			cur.MTime = cur.MTime.UTC().Truncate(time.Microsecond)
			if !cur.Same(e) {
				p.m.FilesSkipped.WithLabelValues(p.cfg.Name, "replaced").Inc()
				log.Info("file replaced since it was ingested; the new version is taken on a later poll")
				return false
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "post_process").Inc()
			log.Warn("post-processing failed; retried next poll", zap.Error(err))
			return false
		}
	}
	if d, ok := ctx.Value(deferredKey{}).(*deferred); ok && ctx.Value(heldKey{}) == nil {
		d.add(func(ctx context.Context) bool { return p.postProcess(ctx, c, e, fence) })
		return false
	}
	if !p.standbysHold(ctx, log) {
		return false
	}
	action := "delete"
	if p.cfg.After != "delete" {
		action = "move"
	}
	if p.cfg.Journal != nil {
		if err := p.cfg.Journal.Record(journal.Entry{At: p.now(), Source: p.cfg.Name, Path: c.ledger, Size: e.Size,
			SHA256: c.prev.SHA256, Action: action}); err != nil {
			p.m.PollErrors.WithLabelValues(p.cfg.Name, "post_process").Inc()
			log.Error("the journal cannot be written: the file stays in the drop", zap.Error(err))
			return false
		}
	}
	var err error
	if c.claimed && p.cfg.DoneMarker != "" {
		// The claimed marker goes first: a crash before the file goes
		// leaves the processing file alone, finished by the next poll; a
		// claimed marker alone would be handed back, for the next upload.
		m := p.marker(c.name)
		err = p.dispose(ctx, path.Join(path.Dir(e.Path), m+claimSuffix+c.claimID), m)
	}
	if err == nil {
		err = p.dispose(ctx, e.Path, c.name)
	}
	if err == nil && !c.claimed {
		// Gone: a file of the same size and mtime there now is another.
		p.mu.Lock()
		delete(p.verified, e.Path)
		p.mu.Unlock()
	}
	if err == nil && !c.claimed {
		p.disposeMarker(ctx, c, log)
	}
	if err == nil {
		err = p.st.MarkPostDone(ctx, p.cfg.Name, c.ledger, p.now())
	}
	if err != nil {
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "post_process").Inc()
		log.Warn("post-processing failed; retried next poll", zap.String("action", action), zap.Error(err))
		return false
	}
	p.m.PostProcessed.WithLabelValues(p.cfg.Name, action).Inc()
	return true
}

// standbysHold reports whether the standbys hold every commit so far
// (Config.WaitForStandbys), so a file's delete or move may run. When they
// do not, the file is counted as waiting and left for a later poll; the
// rest of this poll's files are then left without asking again.
func (p *Poller) standbysHold(ctx context.Context, log *zap.Logger) bool {
	if p.cfg.WaitForStandbys == nil || ctx.Value(heldKey{}) != nil {
		return true
	}
	p.mu.Lock()
	behind := p.now().Before(p.behindUntil)
	if behind {
		p.waiting++
	}
	p.mu.Unlock()
	if behind {
		return false
	}
	err := p.cfg.WaitForStandbys(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.heldSince = time.Time{}
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	now := p.now()
	p.waiting++
	p.behindUntil = now.Add(max(p.cfg.PollInterval/2, time.Second))
	if p.heldSince.IsZero() {
		p.heldSince = now
	}
	p.m.PollErrors.WithLabelValues(p.cfg.Name, "standbys").Inc()
	log.Warn("delete or move left in the drop until the standbys hold its commit; retried next poll", zap.Error(err))
	return false
}

// dispose deletes or moves (as name) the file at from, as after: says. A
// file that is not there is fine: another replica or the partner removed
// it.
func (p *Poller) dispose(ctx context.Context, from, name string) error {
	var err error
	if p.cfg.After == "delete" {
		err = p.src.Remove(ctx, from)
	} else {
		err = p.move(ctx, from, name, strings.TrimPrefix(p.cfg.After, "move:"))
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// disposeMarker deletes or moves the done marker of the unclaimed file c,
// as post-processing does the file, if it is still the marker listed: one
// written since belongs to the next upload under the name.
func (p *Poller) disposeMarker(ctx context.Context, c candidate, log *zap.Logger) {
	if !c.hasMarker {
		return
	}
	cur, err := p.src.Stat(ctx, c.marker.Path)
	if err == nil {
		cur.MTime = cur.MTime.UTC().Truncate(time.Microsecond)
		if !cur.Same(c.marker) {
			log.Info("done marker rewritten since listed; left for the next upload", zap.String("marker", c.marker.Path))
			return
		}
		err = p.dispose(ctx, c.marker.Path, c.marker.Name)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("done marker not removed", zap.String("marker", c.marker.Path), zap.Error(err))
	}
}

// move renames from into dir as name, adding a unique suffix when the name
// is taken.
func (p *Poller) move(ctx context.Context, from, name, dir string) error {
	if err := p.src.MkdirAll(ctx, dir); err != nil {
		return err
	}
	target := path.Join(dir, name)
	for i := 0; i < 5; i++ {
		err := p.src.Rename(ctx, from, target)
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		target = path.Join(dir, fmt.Sprintf("%s.%s-%d", name, p.now().Format("20060102T150405.000000"), i))
	}
	return fmt.Errorf("move %s: no free name in %s", name, dir)
}
