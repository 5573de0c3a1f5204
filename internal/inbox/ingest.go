// Package inbox is the claim side: outcomes, the file and set records, the
// contracts a driver records them under (Ingester, Ledger), and the ingest
// flow.
//
// Ingest records one X12 file in the store: it processes the file
// (internal/process) and feeds every set and acknowledgment into one store
// ingestion, committed with the file's ledger row in one transaction. A
// typical file is parsed whole before its write begins, so no lock or
// connection is held while it is parsed; a large one is written while the
// rest of it is parsed (see Ingest). The poller and `ediwatch ingest`
// share it.
package inbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"time"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
)

// Options is what an ingest needs besides the file.
type Options struct {
	Store Ingester
	// Routes maps an effect kind to the sinks that deliver it: one outbox
	// row per effect and sink, each under the effect key (the outbox is
	// keyed by effect key and sink, so the order of a route's sinks does
	// not matter).
	Routes map[string][]string
	// Ack shapes acknowledgments (our ids, per source).
	Ack ack.Options
	// Timeout, when positive, is the deadline of one ingest, parse and
	// write together (store.ingest_timeout): an ingest that cannot get its
	// connection or lock in time fails and is retried by a later poll.
	Timeout time.Duration
	// PipeFrom is how many bytes of records a file's parse keeps in memory
	// before its write begins, while the rest is parsed (DefaultPipeFrom
	// when 0; see ingest); a file larger than PipeFrom bytes is written
	// from its first record. Tests set 1: every file is written while it
	// is parsed.
	PipeFrom int
	// BeforeWrite, when set, is called between the parse and the write
	// phase of every write attempt. Tests use it to change the store
	// between a claim lookup and the write that verifies it.
	BeforeWrite func(ctx context.Context) error
}

// SetReport is one set's outcome with what processing found.
type SetReport struct {
	SetResult
	Type   string
	Reason string
	// Unbalanced is true for an 835 whose amounts do not balance.
	Unbalanced bool
}

// Report is the outcome of one file.
type Report struct {
	X12     bool
	Sets    []SetReport
	AckKeys []string
	// Warnings counts the envelope reader's warnings by code (what it
	// tolerated; see envelope.Warning).
	Warnings map[string]int
}

// Count returns how many sets had the outcome.
func (r *Report) Count(o Outcome) int { return count(r.Sets, o) }

// ControlNumberStore allocates control numbers; store.Store does.
type ControlNumberStore interface {
	NextControlNumber(ctx context.Context, sender string) (int64, error)
	// ControlNumbersBesideIngestions reports whether NextControlNumber
	// never waits for one of the store's ingestions under way
	// (PostgreSQL reserves on a connection apart from the pool): the
	// parse of a file whose write has begun then takes its numbers from
	// the store instead of asking the write, which answers only once it
	// has caught up with the parse.
	ControlNumbersBesideIngestions() bool
	// KeepControlNumbers takes back [next, end) of sender: numbers an
	// ingestion reserved and committed (Ingestion.NextControlNumbers)
	// and its file left unused, to hand out next if every number handed
	// out before is lower; else they are a gap.
	KeepControlNumbers(sender string, next, end int64)
}

// Ingest records the file r, described by f, in one transaction. On error
// nothing is recorded.
//
// It works in two phases, so a store's write lock (SQLite) or connection
// (PostgreSQL) is held only while writing:
//
//  1. parse: the file is processed and every set record and
//     acknowledgment is put, in file order, in a buffer (memory keeps only
//     a few fields per set for the result). Acknowledgments get their
//     control numbers from opts.Store directly (it must implement
//     ControlNumberStore), outside any transaction: a failed ingest leaves
//     a gap, which X12 allows.
//  2. write: the ingestion is begun and fed the records, then committed.
//
// The phases overlap for a large file: from its first record on for a
// file larger than opts.PipeFrom bytes (DefaultPipeFrom, 4 MiB), else
// once that many bytes of records wait, the ingestion is begun and fed on
// a goroutine of its own, through a pipe, while the rest of the file is
// parsed; a large file's time is then about its write's, not the sum of
// both, and its records are never all held, in memory or on disk. The
// lock or connection is held from then on: the write, the slower phase,
// keeps up with the parse. The parse's acknowledgments then take their
// control numbers from the store when its numbers never wait for the
// write (ControlNumberStore.ControlNumbersBesideIngestions), else from
// the write, in blocks asked
// through the pipe (Ingestion.NextControlNumbers; SQLite's in its
// transaction, since the store's reservation would wait for the write
// lock it holds). A write rolled back as transient
// is retried by parsing the file again (its records were not kept).
//
// Duplicates are cheap: when the store implements ClaimLookup and the file
// holds lookupFrom sets or more, the keys of its sets are looked up from
// the envelope pass on, outside any transaction, on a goroutine of its own
// while the sets are processed (claims), and a set whose key is
// claimed (not as a rejection) is spilled without summary or effects
// (SetRecord.Claimed): its outcome is a duplicate or key conflict whatever
// they are. Its status, problems and acknowledgments are computed as for
// any set. The write verifies every such set; should one have become
// claimable in between (pruned, or claimed anew as a rejection), the write
// fails with ErrClaimChanged, records nothing, and the file is parsed and
// written again with every payload.
//
// opts.Timeout, when set, bounds both phases together.
func Ingest(ctx context.Context, opts Options, f FileInfo, r io.ReadSeeker) (*Report, error) {
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	numbers, ok := opts.Store.(ControlNumberStore)
	if !ok {
		return nil, errors.New("ingest: the store does not allocate control numbers")
	}
	lookup, _ := opts.Store.(ClaimLookup)
	opts.Routes = inSinkOrder(opts.Routes)
	for attempt := 1; ; attempt++ {
		res, err := ingest(ctx, opts, numbers, &f, r, lookup)
		again := false
		switch {
		case errors.Is(err, ErrClaimChanged) && lookup != nil && ctx.Err() == nil:
			// A set whose payload was left out turned out claimable when
			// written: nothing was recorded; parse again with every
			// payload.
			lookup, again = nil, true
		case errors.Is(err, errPipedTransient) && attempt < writeAttempts && ctx.Err() == nil:
			// A write begun during the parse was rolled back by a
			// concurrent ingest: its records were never kept, so the
			// file is parsed again for the next write.
			again = true
		}
		if !again {
			if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				// Canceled or past its deadline mid-write, the store may
				// say only what the cancellation did to it (database/sql
				// closes the transaction's statements): the cause comes
				// first.
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			return res, err
		}
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("ingest: rewind: %w", err)
		}
	}
}

// errPipedTransient wraps ErrTransient from a write begun during the
// parse (ingest's pipeline): Ingest parses the file again to retry it.
var errPipedTransient = fmt.Errorf("ingest: the write begun during the parse: %w", ErrTransient)

// ingest parses r and writes it, looking its keys up first when lookup is
// set.
//
// A file whose records outgrow the spill's memory (a large file) is
// written while the rest of it is still parsed (pipeline; see Ingest).
func ingest(ctx context.Context, opts Options, numbers ControlNumberStore, f *FileInfo, r io.ReadSeeker,
	lookup ClaimLookup) (*Report, error) {
	sp := &spill{limit: opts.PipeFrom}
	if sp.limit <= 0 {
		sp.limit = DefaultPipeFrom
	}
	// A file larger than that is written from its first record on: its
	// records would outgrow the limit, but for duplicates, which are a
	// few bytes each; either way its write is the longer phase.
	sp.early = f.Size > int64(sp.limit)
	p := &parsed{status: FileIngested}
	pl := &pipeline{ctx: ctx, opts: opts, f: f, p: p}
	cn := &pipedNumbers{store: numbers, sp: sp, pl: pl}
	sp.overflow = pl.start
	err := parse(ctx, opts, cn, r, sp, lookup, p, pl)
	if pl.started {
		res, err := pl.finish(sp, err)
		if err == nil {
			cn.keepUnused()
		}
		return res, err
	}
	if err != nil {
		return nil, err
	}
	if err := f.sha256(); err != nil {
		return nil, err
	}
	// A conflict with a concurrent ingest (PostgreSQL broke a deadlock
	// between two files inserting rows of the same ordering keys in
	// opposite orders) rolled everything back: the records are in the
	// spill, so the write is tried again, a few times, before the file
	// counts a failed attempt.
	for attempt := 1; ; attempt++ {
		if opts.BeforeWrite != nil {
			if err := opts.BeforeWrite(ctx); err != nil {
				return nil, err
			}
		}
		res, err := write(ctx, opts, *f, p, sp)
		if !errors.Is(err, ErrTransient) || attempt == writeAttempts || ctx.Err() != nil {
			return res, err
		}
	}
}

// sha256 fills f.SHA256 from f.SHA256Of when it is not known yet.
func (f *FileInfo) sha256() error {
	if f.SHA256 != "" || f.SHA256Of == nil {
		return nil
	}
	sum, err := f.SHA256Of()
	if err != nil {
		return fmt.Errorf("ingest: file hash: %w", err)
	}
	f.SHA256 = sum
	return nil
}

// pipeline is the write of a large file begun while the file is parsed
// (see ingest): the spill's overflow starts it, the parse feeds it through
// a pipe, finish waits for its outcome.
type pipeline struct {
	ctx  context.Context
	opts Options
	f    *FileInfo
	p    *parsed

	// lookup is the file's claim lookup, if any.
	lookup *claims

	started bool
	pw      *io.PipeWriter
	// answer carries each block of control numbers the write gives the
	// parse (Ingestion.NextControlNumbers).
	answer chan numberAnswer
	// done is closed when the write has returned, with its outcome in
	// res and err.
	done chan struct{}
	res  *Report
	err  error
}

type numberAnswer struct {
	first, end int64
	err        error
}

// start is the spill's overflow: on the parse's goroutine, it begins the
// ingestion, then writes on a goroutine of its own the records in mem and
// every record written to the pipe it returns.
func (pl *pipeline) start(mem []byte) (io.Writer, error) {
	if err := pl.f.sha256(); err != nil {
		return nil, err
	}
	if pl.opts.BeforeWrite != nil {
		if err := pl.opts.BeforeWrite(pl.ctx); err != nil {
			return nil, err
		}
	}
	// The claim lookup may still run: it takes no connection the write
	// holds (ClaimLookup), so the write, which waits for the parse, which
	// waits for the lookup, is never what the lookup waits for.
	ing, err := pl.opts.Store.BeginIngest(pl.ctx, *pl.f)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	pl.started, pl.pw = true, pw
	pl.answer, pl.done = make(chan numberAnswer, 1), make(chan struct{})
	go func() {
		defer close(pl.done)
		defer ing.Rollback()
		rd := &spillReader{r: bufio.NewReaderSize(io.MultiReader(bytes.NewReader(mem), pr), 256<<10)}
		err := feed(pl.ctx, ing, rd, -1, pl.number)
		if err == nil {
			// The parse closed the pipe once done: pl.p is complete.
			pl.res, err = commit(pl.ctx, ing, pl.p)
		}
		pl.err = err
		// A parse still writing learns that the write is over.
		pr.CloseWithError(errWriteEnded(err))
	}()
	return pw, nil
}

// errWriteEnded is what a parse still writing to a pipeline's pipe gets
// once the write has returned.
func errWriteEnded(err error) error {
	if err != nil {
		return fmt.Errorf("ingest: write: %w", err)
	}
	return errors.New("ingest: write: committed before the parse ended")
}

// number answers a request of the parse for up to n control numbers, in
// the ingestion's transaction.
func (pl *pipeline) number(ctx context.Context, ing Ingestion, sender string, n int64) error {
	first, end, err := ing.NextControlNumbers(ctx, sender, n)
	if err == nil && (end <= first || end-first > n) {
		err = fmt.Errorf("ingest: control numbers [%d, %d) of %s asked for %d", first, end, sender, n)
	}
	pl.answer <- numberAnswer{first, end, err}
	return err
}

// finish ends the parse's side of the pipe, with parseErr if the parse
// failed, and returns the write's outcome.
func (pl *pipeline) finish(sp *spill, parseErr error) (*Report, error) {
	if parseErr == nil {
		parseErr = sp.flush()
	}
	pl.pw.CloseWithError(parseErr) // nil: the records end here
	<-pl.done
	var err error
	switch {
	case parseErr != nil && pl.err != nil && errors.Is(parseErr, pl.err):
		err = pl.err // the parse stopped because the write had failed
	case parseErr != nil:
		err = parseErr // the write, which never saw the records end, failed on it
	default:
		err = pl.err
	}
	if err != nil {
		if errors.Is(err, ErrTransient) {
			return nil, fmt.Errorf("%w: %w", errPipedTransient, err)
		}
		return nil, err
	}
	return pl.res, nil
}

// pipedNumbers gives the parse its control numbers: from the store, or,
// once its write is begun, from that write (Ingestion.NextControlNumbers),
// asked through the pipe after the records before, unless the store's
// numbers never wait for the write (ControlNumbersBesideIngestions).
//
// The write answers once it has written every record before the request,
// so the parse waits for the write to catch up: once per acknowledgment, a
// file of many interchanges would parse and write by turns instead of
// together. It asks for blocks instead, each twice the last, up to
// pipedBlockMax, and keeps what it leaves of them for the store
// (keepUnused).
type pipedNumbers struct {
	store  ControlNumberStore
	sp     *spill
	pl     *pipeline
	blocks map[string]*pipedBlock
}

type pipedBlock struct{ next, end, size int64 }

// pipedBlockMax bounds the control numbers asked of a write at once.
const pipedBlockMax = 64

// Next implements ack.ControlNumbers.
func (c *pipedNumbers) Next(ctx context.Context, sender string) (int64, error) {
	if c.pl == nil || !c.pl.started {
		return c.store.NextControlNumber(ctx, sender)
	}
	if c.store.ControlNumbersBesideIngestions() {
		return c.store.NextControlNumber(ctx, sender)
	}
	b := c.blocks[sender]
	if b == nil {
		b = &pipedBlock{}
		if c.blocks == nil {
			c.blocks = map[string]*pipedBlock{}
		}
		c.blocks[sender] = b
	}
	if b.next >= b.end {
		b.size = min(max(2*b.size, 1), pipedBlockMax)
		if err := c.sp.putNumberRequest(sender, b.size); err != nil {
			return 0, err
		}
		select {
		case a := <-c.pl.answer:
			if a.err != nil {
				return 0, a.err
			}
			b.next, b.end = a.first, a.end
		case <-c.pl.done:
			if c.pl.err != nil {
				return 0, c.pl.err
			}
			return 0, errors.New("ingest: the write ended before it answered")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	n := b.next
	b.next++
	return n, nil
}

// keepUnused gives the store the numbers of the blocks the write reserved
// that the parse left unused, once the write has committed them.
func (c *pipedNumbers) keepUnused() {
	for sender, b := range c.blocks {
		if b.next < b.end {
			c.store.KeepControlNumbers(sender, b.next, b.end)
		}
	}
}

// lookupFrom is the number of sets from which a file's keys are looked up
// before its sets are processed: a set already claimed needs no payload.
// A smaller file is written without the extra query.
const lookupFrom = 64

// claims is what a lookup found for a file: which sets are claimed
// already, by position in the file. Each position keeps a 64-bit hash of
// its key, not the key: kept while the whole file is processed, the keys
// of a large file would be most of its memory. A set taken for claimed by
// a collision is verified by the ingestion like any (SetRecord.Claimed).
//
// The lookup runs on a goroutine of its own, claimChunk keys a query in
// file order, while the sets are processed: a set's answer waits only for
// its own chunk; a large file's write may begin meanwhile (the lookup
// takes no connection the write holds: ClaimLookup). Should a query fail,
// the sets it and the chunks after it hold count as not claimed: they
// carry their payloads, and the ingestion decides their outcomes as it
// does for any set.
type claims struct {
	seed    maphash.Seed
	keys    []uint64 // a hash of every set's key, in file order
	claimed []bool
	// clean: of a set claimed by a clean set (Claim.CleanHash), a hash of
	// that set's content hash (hex); else 0.
	clean   []uint64
	ready   []chan struct{} // closed once its chunk's answers are in claimed
	stop    context.CancelFunc
	done    chan struct{} // closed when the lookup has returned
	next    int           // the position of the set asked about next
	lastKey string        // the set asked about last, and its answer
	last    bool
}

// claimChunk is how many keys one claim lookup query asks about.
const claimChunk = 2000

// lookUpClaims starts looking up which of a file's set keys (in file
// order) are claimed already (see ClaimLookup); nil for a file of fewer
// than lookupFrom sets. The caller calls close once done asking.
func lookUpClaims(ctx context.Context, lookup ClaimLookup, keys []string) *claims {
	if len(keys) < lookupFrom {
		return nil
	}
	c := &claims{seed: maphash.MakeSeed(), keys: make([]uint64, len(keys)), claimed: make([]bool, len(keys)),
		clean: make([]uint64, len(keys)), ready: make([]chan struct{}, (len(keys)+claimChunk-1)/claimChunk),
		done: make(chan struct{})}
	for i, k := range keys {
		c.keys[i] = maphash.String(c.seed, k)
	}
	for i := range c.ready {
		c.ready[i] = make(chan struct{})
	}
	ctx, c.stop = context.WithCancel(ctx)
	go func() {
		defer close(c.done)
		failed := false
		for i, ready := range c.ready {
			chunk := keys[i*claimChunk : min(len(keys), (i+1)*claimChunk)]
			if !failed {
				found, err := lookup.ClaimedKeys(ctx, chunk)
				failed = err != nil
				for j, k := range chunk {
					claim, ok := found[k]
					c.claimed[i*claimChunk+j] = ok
					if ok && claim.CleanHash != "" {
						c.clean[i*claimChunk+j] = maphash.String(c.seed, claim.CleanHash)
					}
				}
			}
			clear(chunk) // the keys are let go as they are answered
			close(ready)
		}
	}()
	return c
}

// close stops the lookup, if it still runs, and waits for it.
func (c *claims) close() {
	if c != nil {
		c.stop()
		<-c.done
	}
}

// ask answers for the next set of the file, which process.File asks about
// once, in file order, once the set is read (Config.Claims): claimed,
// and claimed by a clean set of the same content hash while Normal itself
// (see process.ClaimedClean).
func (c *claims) ask(s *envelope.Set) process.Known {
	i := c.next
	c.next++
	c.last = false
	known := process.Unknown
	if i < len(c.keys) {
		<-c.ready[i/claimChunk]
		c.last = c.claimed[i] && c.keys[i] == maphash.String(c.seed, s.Key)
		if c.last {
			known = process.Claimed
			if s.Normal && c.clean[i] != 0 && c.clean[i] == maphash.String(c.seed, s.HashHex()) {
				known = process.ClaimedClean
			}
		}
	}
	c.lastKey = s.Key
	return known
}

// answered returns the answer ask gave for the set key, which process.File
// emits right after asking.
func (c *claims) answered(key string) bool {
	return c != nil && c.lastKey == key && c.last
}

// writeAttempts bounds the writes of one ingest after transient conflicts.
const writeAttempts = 3

// parsed is what the parse phase keeps in memory: per set only what the
// result reports; the records themselves are in the spill.
type parsed struct {
	x12    bool
	status FileStatus
	reason string
	meta   []setMeta
	// warnings counts the envelope warnings by code.
	warnings map[string]int
}

// setMeta is what the report says of a set besides its result.
type setMeta struct {
	typ, reason string
	unbalanced  bool
}

// parse processes r into sp and out.
func parse(ctx context.Context, opts Options, cn ack.ControlNumbers, r io.ReadSeeker, sp *spill,
	lookup ClaimLookup, out *parsed, pl *pipeline) error {
	// Transient: a set's record holds its payloads packed (spill.put),
	// nothing of its document.
	cfg := process.Config{ControlNumbers: cn, Ack: opts.Ack, Transient: true}
	if o, ok := opts.Store.(AnswerLookup); ok {
		// Outside the ingestion's transaction, like the claim lookup: an
		// acknowledgment's original is named when it is there to be found.
		cfg.Originals = o
	}
	var claimed *claims
	var types process.Repeated
	if lookup != nil {
		cfg.Claims = func(ctx context.Context, keys []string) (func(*envelope.Set) process.Known, error) {
			if claimed = lookUpClaims(ctx, lookup, keys); claimed == nil {
				return nil, nil
			}
			pl.lookup = claimed
			return claimed.ask, nil
		}
		defer func() { claimed.close() }()
	}
	summary, err := process.File(ctx, r, cfg,
		func(it process.Item) error {
			switch {
			case it.Set != nil:
				rec, err := setRecord(it.Set, opts.Routes, claimed.answered(it.Set.Key))
				if err != nil {
					return err
				}
				// Kept for the whole file: the type shared (it is a slice
				// of the set's key, which would be kept with it).
				out.meta = append(out.meta, setMeta{typ: types.Of(it.Set.Type), reason: it.Set.Reason,
					unbalanced: it.Set.Payment != nil && !it.Set.Payment.Balance.Balanced})
				return sp.put(spilled{Set: &rec})
			case it.Received != nil:
				// Recorded as acknowledgments are: not part of a set.
				if unrouted(*it.Received, opts.Routes) {
					return nil
				}
				es, err := effects(*it.Received, opts.Routes)
				if err != nil {
					return err
				}
				for i := range es {
					if err := sp.put(spilled{Ack: &es[i]}); err != nil {
						return err
					}
				}
				return nil
			case it.Ack != nil:
				es, err := effects(*it.Ack, opts.Routes)
				if err != nil {
					return err
				}
				for i := range es {
					// Quarantined content is not acknowledged as accepted.
					es[i].UnlessConflictIn = it.Ack.Answers
					if err := sp.put(spilled{Ack: &es[i]}); err != nil {
						return err
					}
				}
				return nil
			}
			return nil
		})
	if err != nil {
		return err
	}
	out.x12 = summary.X12
	out.warnings = summary.WarningCounts
	if summary.X12 {
		return nil
	}
	// Not X12: the file itself is keyed by its SHA-256 and rejected, with a
	// TA1 when our and the partner's ids are configured (there is no
	// interchange to take them from).
	out.status, out.reason = FileRejected, summary.Errors[0].Error()
	out.meta = append(out.meta, setMeta{reason: out.reason})
	if err := sp.put(spilled{Set: &SetRecord{Key: summary.Key, ContentHash: summary.Key, Type: "",
		Rejected: true, Reason: out.reason}}); err != nil {
		return err
	}
	if opts.Ack.Us.ID != "" && opts.Ack.Them.ID != "" {
		// Ours to send: a TA1 that cannot be built (its control number
		// not taken) fails the ingest, which records nothing and is
		// tried again, rather than the file being recorded unanswered.
		x, err := ack.BuildTA1Unreadable(ctx, opts.Ack.Us, opts.Ack.Them, cn, opts.Ack)
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		es, err := effects(process.Effect{Kind: process.KindAckTA1, Key: "ta1:" + summary.Key,
			OrderingKey: "acks:" + opts.Ack.Them.Qualifier + ":" + opts.Ack.Them.ID,
			Payload: mustJSON(process.AckEvent{Answers: summary.Key,
				Partner: opts.Ack.Them.Qualifier + ":" + opts.Ack.Them.ID, X12: string(x)})}, opts.Routes)
		if err != nil {
			return err
		}
		for i := range es {
			if err := sp.put(spilled{Ack: &es[i]}); err != nil {
				return err
			}
		}
	}
	return nil
}

func write(ctx context.Context, opts Options, f FileInfo, p *parsed, sp *spill) (*Report, error) {
	rd, err := sp.reader()
	if err != nil {
		return nil, err
	}
	ing, err := opts.Store.BeginIngest(ctx, f)
	if err != nil {
		return nil, err
	}
	defer ing.Rollback()
	if err := feed(ctx, ing, rd, sp.n, nil); err != nil {
		return nil, err
	}
	return commit(ctx, ing, p)
}

// feed adds the records of rd to ing: n of them, or, with n < 0, every
// record to the end. A control number request is answered by number.
func feed(ctx context.Context, ing Ingestion, rd *spillReader, n int,
	number func(ctx context.Context, ing Ingestion, sender string, n int64) error) error {
	for i := 0; n < 0 || i < n; i++ {
		rec, err := rd.next()
		if err == io.EOF && n < 0 {
			return nil
		}
		if err == io.EOF {
			err = fmt.Errorf("ingest: read spill: %d records of %d", i, n)
		}
		if err != nil {
			return err
		}
		switch {
		case rec.Set != nil:
			err = ing.AddSet(ctx, *rec.Set)
		case rec.Ack != nil:
			err = ing.AddAck(ctx, *rec.Ack)
		case rec.NumberFor != "" && number != nil:
			err = number(ctx, ing, rec.NumberFor, rec.Numbers)
		default:
			err = errors.New("ingest: read spill: a control number request outside a pipe")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// commit commits ing and returns the file's report.
func commit(ctx context.Context, ing Ingestion, p *parsed) (*Report, error) {
	res, err := ing.Commit(ctx, p.status, p.reason)
	if err != nil {
		return nil, err
	}
	if len(res.Sets) != len(p.meta) {
		return nil, fmt.Errorf("ingest: %d results for %d sets", len(res.Sets), len(p.meta))
	}
	// An effect's rows at several sinks share its key and come one after
	// another: the report names it once.
	out := &Report{X12: p.x12, AckKeys: slices.Compact(res.AckKeys), Sets: make([]SetReport, len(res.Sets)),
		Warnings: p.warnings}
	for i, s := range res.Sets {
		s.EffectKeys, s.ConflictKeys = slices.Compact(s.EffectKeys), slices.Compact(s.ConflictKeys)
		m := p.meta[i]
		out.Sets[i] = SetReport{SetResult: s, Type: m.typ, Reason: m.reason, Unbalanced: m.unbalanced}
	}
	return out, nil
}

// setRecord returns the record of s; a claimed set (see
// SetRecord.Claimed) gets neither summary nor effects.
func setRecord(s *process.Set, routes map[string][]string, claimed bool) (SetRecord, error) {
	rec := SetRecord{Key: s.Key, ContentHash: s.ContentHash, Type: s.Type,
		Rejected: s.Status == process.Rejected, Reason: s.Reason, Claimed: claimed, Clean: s.Clean()}
	if claimed {
		return rec, nil
	}
	if sum, ok := s.AppendSummaryJSON(nil); ok {
		rec.Summary = sum
	}
	for _, e := range s.Effects {
		if unrouted(e, routes) {
			continue
		}
		se, err := effects(e, routes)
		if err != nil {
			return rec, err
		}
		rec.Effects = append(rec.Effects, se...)
	}
	return rec, nil
}

// unrouted reports whether e is of an optional kind the configuration does
// not route (process.OptionalKind): such an effect is not recorded.
func unrouted(e process.Effect, routes map[string][]string) bool {
	_, ok := routes[e.Kind]
	return !ok && process.OptionalKind(e.Kind)
}

// inSinkOrder returns routes with each route's sinks in name order. An
// effect's rows are written in that order whatever its route's, so two
// ingests of one effect by replicas whose routes list its sinks in other
// orders take its rows' unique index entries in the same order: the second
// waits for the first rather than deadlocking with it, and then finds the
// rows (a business duplicate, or a conflict).
func inSinkOrder(routes map[string][]string) map[string][]string {
	out := make(map[string][]string, len(routes))
	for kind, sinks := range routes {
		out[kind] = slices.Sorted(slices.Values(sinks))
	}
	return out
}

// effects returns the outbox rows of e: one per sink of its route, each
// under e's key.
func effects(e process.Effect, routes map[string][]string) ([]outbox.Effect, error) {
	sinks := routes[e.Kind]
	if len(sinks) == 0 {
		return nil, fmt.Errorf("ingest: no route for effect kind %s", e.Kind)
	}
	out := make([]outbox.Effect, len(sinks))
	for i, sink := range sinks {
		out[i] = outbox.Effect{Kind: e.Kind, Key: e.Key, OrderingKey: e.OrderingKey, Sink: sink,
			Payload: e.Payload, Hash: e.Hash}
	}
	return out, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ingest: encode: %v", err))
	}
	return b
}

// ControlNumbers adapts a store to ack.ControlNumbers.
type ControlNumbers struct {
	Store interface {
		NextControlNumber(ctx context.Context, sender string) (int64, error)
	}
}

// Next implements ack.ControlNumbers.
func (c ControlNumbers) Next(ctx context.Context, sender string) (int64, error) {
	return c.Store.NextControlNumber(ctx, sender)
}
