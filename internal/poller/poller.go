// Package poller watches drops: it lists each configured directory of a
// source once per poll, diffs the listing against the store's ledger in
// one query, takes files whose size and mtime have been stable, downloads
// them into unlinked spool files with SHA-256 computed on the way, ingests
// each in one transaction, and only then deletes or moves them.
//
// Each (source, directory) is polled by one replica at a time through a
// store lease; when two replicas do download the same file, the inbox
// decides.
package poller

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ediwatch/ediwatch/internal/ingest"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/store"
)

// Store is what the poller needs of the store.
type Store interface {
	store.Ledger
	store.Leases
	store.Ingester
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
	// least 10 s). The holder renews it at each poll and after each file.
	LeaseTTL time.Duration
	// SpoolDir holds spool files (default the system temp dir). They are
	// unlinked as soon as created, so none survives a crash.
	SpoolDir string
	// RetryBase and RetryMax shape the backoff between attempts at a file
	// that failed (default 10s and 1h).
	RetryBase, RetryMax time.Duration
}

// Poller polls one source. Run it with Run; PollOnce is for tests and
// tools. It is not safe for concurrent polls of itself.
type Poller struct {
	cfg    Config
	src    Source
	st     Store
	ingest ingest.Options
	log    *zap.Logger
	m      *metrics.Metrics
	now    func() time.Time

	mu     sync.Mutex
	seen   map[string]map[string]observation // dir -> path -> observation
	leases map[string]int64                  // lease name -> fencing token held
}

// observation is a file's size and mtime as listed, and since when.
type observation struct {
	size  int64
	mtime time.Time
	since time.Time
}

// New returns a poller for src. ing.Store is set to st.
func New(cfg Config, src Source, st Store, ing ingest.Options, log *zap.Logger, m *metrics.Metrics) *Poller {
	if len(cfg.Include) == 0 {
		cfg.Include = []string{"*"}
	}
	if cfg.After == "" {
		cfg.After = "leave"
	}
	if cfg.MaxFilesPerPoll <= 0 {
		cfg.MaxFilesPerPoll = 1000
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = 1 << 30
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Downloads <= 0 {
		cfg.Downloads = 4
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = max(3*cfg.PollInterval, 10*time.Second)
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 10 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Hour
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		cfg.Holder = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	ing.Store = st
	return &Poller{cfg: cfg, src: src, st: st, ingest: ing, log: log.With(zap.String("source", cfg.Name)), m: m,
		now: func() time.Time { return time.Now().UTC() }, seen: map[string]map[string]observation{},
		leases: map[string]int64{}}
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
		st, err := p.PollOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("poll failed", zap.Error(err))
		}
		p.log.Debug("polled", zap.Int("listed", st.Listed), zap.Int("downloaded", st.Downloaded),
			zap.Int("ingested", st.Ingested), zap.Int("skipped", st.Skipped), zap.Int("failed", st.Failed))
		t.Reset(jitter(p.cfg.PollInterval))
	}
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

// jitter returns d ± 10%.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(d/5)+1))
	if err != nil {
		return d
	}
	return d - d/10 + time.Duration(n.Int64())
}

// Stats counts what one poll did.
type Stats struct {
	Listed, Downloaded, Ingested, Skipped, Failed, PostProcessed int
}

func (s *Stats) add(o Stats) {
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

type candidate struct {
	e        Entry
	prev     store.FileState
	hasPrev  bool
	postOnly bool
}

func (p *Poller) pollDir(ctx context.Context, dir string) (Stats, error) {
	var st Stats
	lease := "poll:" + p.cfg.Name + ":" + dir
	if ok, err := p.renew(ctx, lease); err != nil {
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "lease").Inc()
		return st, fmt.Errorf("lease: %w", err)
	} else if !ok {
		return st, nil // another replica polls this directory
	}
	entries, err := p.src.List(ctx, dir)
	if err != nil {
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "list").Inc()
		return st, fmt.Errorf("list: %w", err)
	}
	var matched []Entry
	for _, e := range entries {
		if p.matches(e.Name) {
			e.MTime = e.MTime.UTC().Truncate(time.Microsecond) // what the ledger can hold
			matched = append(matched, e)
		}
	}
	st.Listed = len(matched)
	p.m.FilesListed.WithLabelValues(p.cfg.Name).Add(float64(len(matched)))
	paths := make([]string, len(matched))
	for i, e := range matched {
		paths[i] = e.Path
	}
	states, err := p.st.FileStates(ctx, p.cfg.Name, paths)
	if err != nil {
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "ledger").Inc()
		return st, fmt.Errorf("ledger: %w", err)
	}
	now := p.now()
	var todo []candidate
	skip := func(reason string) {
		st.Skipped++
		p.m.FilesSkipped.WithLabelValues(p.cfg.Name, reason).Inc()
	}
	p.mu.Lock()
	obs := p.seen[dir]
	next := make(map[string]observation, len(matched))
	for _, e := range matched {
		prev, has := states[e.Path]
		same := has && prev.Size == e.Size && prev.MTime.Equal(e.MTime)
		switch {
		case same && (prev.Status == store.FileIngested || prev.Status == store.FileRejected):
			if prev.Status == store.FileIngested && p.cfg.After != "leave" && !prev.PostDone {
				todo = append(todo, candidate{e: e, prev: prev, hasPrev: true, postOnly: true})
			} else {
				skip("final")
			}
			continue
		case same && prev.Status == store.FileFailed:
			skip("failed")
			continue
		case same && prev.Status == store.FileRetrying && now.Before(prev.UpdatedAt.Add(p.retryDelay(prev.Attempts))):
			skip("backoff")
			next[e.Path] = obs[e.Path]
			continue
		}
		if e.Size > p.cfg.MaxFileSize {
			p.record(ctx, e, store.FileRejected, fmt.Sprintf("larger than max_file_size (%d > %d bytes)", e.Size, p.cfg.MaxFileSize))
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
		if now.Sub(o.since) < p.cfg.StableFor {
			skip("unstable")
			continue
		}
		todo = append(todo, candidate{e: e, prev: prev, hasPrev: same})
	}
	p.seen[dir] = next
	p.mu.Unlock()
	if len(todo) > p.cfg.MaxFilesPerPoll {
		for range todo[p.cfg.MaxFilesPerPoll:] {
			skip("limit")
		}
		todo = todo[:p.cfg.MaxFilesPerPoll]
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.Downloads)
	for _, c := range todo {
		g.Go(func() error {
			defer p.renew(gctx, lease) // a long poll keeps its lease
			var s Stats
			if c.postOnly {
				if p.postProcess(gctx, c.e) {
					s.PostProcessed++
				}
			} else {
				s = p.take(gctx, dir, c)
			}
			mu.Lock()
			st.add(s)
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	return st, ctx.Err()
}

// renew takes or extends the lease for this poller; it reports whether
// this poller holds it.
func (p *Poller) renew(ctx context.Context, lease string) (bool, error) {
	token, ok, err := p.st.AcquireLease(ctx, lease, p.cfg.Holder, p.cfg.LeaseTTL, p.now())
	if err != nil || !ok {
		return false, err
	}
	p.mu.Lock()
	p.leases[lease] = token
	p.mu.Unlock()
	return true, nil
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
	d := p.cfg.RetryBase << min(max(attempts-1, 0), 30)
	if d <= 0 || d > p.cfg.RetryMax {
		d = p.cfg.RetryMax
	}
	return d
}

// take downloads, ingests and post-processes one file.
func (p *Poller) take(ctx context.Context, dir string, c candidate) Stats {
	var st Stats
	e := c.e
	corr := store.NewCorrelationID()
	log := p.log.With(zap.String("path", e.Path), zap.String("correlation_id", corr))
	spool, sum, n, err := p.download(ctx, e)
	if errors.Is(err, os.ErrNotExist) {
		// Deleted between the listing and the download (by the partner or
		// another replica's post-processing): nothing to take, no failure.
		st.Skipped++
		p.m.FilesSkipped.WithLabelValues(p.cfg.Name, "vanished").Inc()
		log.Info("file vanished before download")
		return st
	}
	if err != nil {
		if ctx.Err() != nil {
			return st
		}
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "download").Inc()
		p.fail(ctx, c, "download", err, log)
		st.Failed++
		return st
	}
	defer spool.Close()
	st.Downloaded++
	p.m.FilesDownloaded.WithLabelValues(p.cfg.Name).Inc()
	p.m.BytesDownloaded.WithLabelValues(p.cfg.Name).Add(float64(n))
	if n != e.Size {
		// Changed while downloading: it is not stable after all.
		p.mu.Lock()
		delete(p.seen[dir], e.Path)
		p.mu.Unlock()
		log.Info("file changed during download; retried when stable", zap.Int64("listed", e.Size), zap.Int64("read", n))
		return st
	}
	res, err := ingest.File(ctx, p.ingest, store.FileInfo{Source: p.cfg.Name, Path: e.Path, Size: n, MTime: e.MTime,
		SHA256: sum, CorrelationID: corr, Now: p.now()}, spool)
	if err != nil {
		if ctx.Err() != nil {
			return st
		}
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "ingest").Inc()
		p.fail(ctx, c, "ingest", err, log)
		st.Failed++
		return st
	}
	st.Ingested++
	fields := []zap.Field{zap.String("sha256", sum), zap.Bool("x12", res.X12)}
	for _, o := range []store.Outcome{store.Processed, store.Duplicate, store.BusinessDuplicate, store.Conflict, store.Rejected} {
		if n := res.Count(o); n > 0 {
			p.m.Sets.WithLabelValues(string(o)).Add(float64(n))
			fields = append(fields, zap.Int(string(o), n))
		}
	}
	for _, s := range res.Sets {
		if s.Unbalanced && s.Outcome == store.Processed {
			p.m.Unbalanced.Inc()
		}
		if s.Outcome == store.Conflict {
			log.Warn("key conflict: same envelope key, other content; quarantined", zap.String("key", s.Key),
				zap.String("original_correlation_id", s.OriginalCorrelationID))
		}
	}
	log.Info("file ingested", fields...)
	if p.postProcess(ctx, e) {
		st.PostProcessed++
	}
	return st
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
// after MaxAttempts, failed for good.
func (p *Poller) fail(ctx context.Context, c candidate, stage string, err error, log *zap.Logger) {
	attempts := 1
	if c.hasPrev && c.prev.Status == store.FileRetrying {
		attempts = c.prev.Attempts + 1
	}
	status := store.FileRetrying
	if attempts >= p.cfg.MaxAttempts {
		status = store.FileFailed
		p.m.FilesFailed.WithLabelValues(p.cfg.Name, "gave_up").Inc()
	}
	p.m.FilesFailed.WithLabelValues(p.cfg.Name, stage).Inc()
	msg := stage + ": " + err.Error()
	p.record(ctx, c.e, status, msg)
	log.Warn("file not ingested", zap.String("stage", stage), zap.Error(err), zap.Int("attempt", attempts),
		zap.String("status", string(status)))
}

func (p *Poller) record(ctx context.Context, e Entry, status store.FileStatus, msg string) {
	if _, err := p.st.RecordFileProblem(ctx, store.FileInfo{Source: p.cfg.Name, Path: e.Path, Size: e.Size,
		MTime: e.MTime, Now: p.now()}, status, msg); err != nil {
		p.log.Error("ledger write failed", zap.String("path", e.Path), zap.Error(err))
	}
}

// postProcess deletes or moves a file whose ingest committed, and records
// it. A failure is counted and retried on a later poll; the file is never
// ingested again for it.
func (p *Poller) postProcess(ctx context.Context, e Entry) bool {
	var action string
	var err error
	switch {
	case p.cfg.After == "leave":
		return false
	case p.cfg.After == "delete":
		action = "delete"
		err = p.src.Remove(ctx, e.Path)
	case strings.HasPrefix(p.cfg.After, "move:"):
		action = "move"
		err = p.move(ctx, e, strings.TrimPrefix(p.cfg.After, "move:"))
	}
	if errors.Is(err, os.ErrNotExist) {
		err = nil // already gone: another replica or the partner removed it
	}
	if err == nil {
		err = p.st.MarkPostDone(ctx, p.cfg.Name, e.Path, p.now())
	}
	if err != nil {
		p.m.PollErrors.WithLabelValues(p.cfg.Name, "post_process").Inc()
		p.log.Warn("post-processing failed; retried next poll", zap.String("path", e.Path), zap.String("action", action), zap.Error(err))
		return false
	}
	p.m.PostProcessed.WithLabelValues(p.cfg.Name, action).Inc()
	return true
}

// move renames the file into dir, adding a unique suffix when the name is
// taken.
func (p *Poller) move(ctx context.Context, e Entry, dir string) error {
	if err := p.src.MkdirAll(ctx, dir); err != nil {
		return err
	}
	target := path.Join(dir, e.Name)
	for i := 0; i < 5; i++ {
		err := p.src.Rename(ctx, e.Path, target)
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		target = path.Join(dir, fmt.Sprintf("%s.%s-%d", e.Name, p.now().Format("20060102T150405.000000"), i))
	}
	return fmt.Errorf("move %s: no free name in %s", e.Name, dir)
}
