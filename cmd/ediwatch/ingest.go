package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/pgp"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
)

func newIngestCmd(stdout, stderr io.Writer) *cobra.Command {
	var cfgPath, source string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ingest --config FILE [--source NAME] [--json] PATH...",
		Short: "Ingest local X12 files (or directories of them) through the poller's path",
		Long: `ingest records local files in the store exactly as the poller records
downloaded ones: each transaction set is claimed once, its effects queued for
the relay, its acknowledgments built. Use it to backfill an archive or ingest a
manual drop. It is safe to run while the daemon runs and from several processes
at once: a file already ingested reports its sets as duplicates of the
original.

Files are recorded in the listing ledger under the source --source (default
"manual"); when a configured source has that name, its acknowledgment ids
(us, them) and its decrypt settings apply: OpenPGP messages are decrypted
and verified as the poller does, a refused one recorded as rejected. Directories are walked recursively.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defer tuneIngestGC()()
			cfg, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := openStore(ctx, cfg.Store, true)
			if err != nil {
				return err
			}
			defer s.Close()
			opts := inbox.Options{Store: s, Routes: cfg.RoutesFor(source), Ack: ackOptions(cfg, source),
				Timeout: cfg.Store.IngestTimeout.D()}
			var dec *pgp.Decrypter
			for _, sc := range cfg.Sources {
				if sc.Name == source {
					if dec, err = buildDecrypter(sc); err != nil {
						return fmt.Errorf("sources %s: %w", sc.Name, err)
					}
				}
			}
			var files []string
			for _, arg := range args {
				found, err := listFiles(arg)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				files = append(files, found...)
			}
			// One line per set: buffered, and flushed after each file so
			// that what it printed comes before the next file's errors.
			out := bufio.NewWriterSize(stdout, 64<<10)
			enc := json.NewEncoder(out)
			failed := 0
			for _, path := range files {
				res, corr, err := ingestPath(cmd, opts, dec, source, path)
				if err != nil {
					failed++
					fmt.Fprintf(stderr, "%s: %v\n", path, err)
					continue
				}
				for _, set := range res.Sets {
					if asJSON {
						enc.Encode(map[string]any{"file": path, "key": set.Key, "outcome": set.Outcome,
							"type": set.Type, "effect_keys": nonNil(set.EffectKeys), "correlation_id": corr,
							"original_correlation_id": set.OriginalCorrelationID, "reason": set.Reason,
							"conflict_keys": nonNil(set.ConflictKeys)})
						continue
					}
					fmt.Fprintf(out, "%s\t%s\t%s\t%d effects\n", path, set.Key, set.Outcome, len(set.EffectKeys))
				}
				if err := out.Flush(); err != nil {
					return err
				}
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d files not ingested", failed, len(files))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "configuration file")
	cmd.Flags().StringVar(&source, "source", "manual", "source name recorded in the listing ledger")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per transaction set")
	return cmd
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ackOptions returns the acknowledgment ids configured for source.
func ackOptions(cfg config.Config, source string) ack.Options {
	var o ack.Options
	for _, s := range cfg.Sources {
		if s.Name != source {
			continue
		}
		if q, id, ok := strings.Cut(s.Us, ":"); ok {
			o.Us = ack.Party{Qualifier: q, ID: id}
		}
		if q, id, ok := strings.Cut(s.Them, ":"); ok {
			o.Them = ack.Party{Qualifier: q, ID: id}
		}
		o.Ack277 = s.Ack277
	}
	return o
}

func listFiles(arg string) ([]string, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{arg}, nil
	}
	var out []string
	err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// ingestPath ingests the file at path. With dec, an OpenPGP message is
// decrypted (and verified) into an unlinked temporary file first, and its
// plaintext ingested; a message refused is recorded in the ledger as
// rejected with its reason, and returned as an error.
func ingestPath(cmd *cobra.Command, opts inbox.Options, dec *pgp.Decrypter, source, path string) (*inbox.Report, string, error) {
	fh, err := openRegular(path)
	if err != nil {
		return nil, "", err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, "", err
	}
	return ingestOpened(cmd, opts, dec, source, path, fh, st)
}

// ingestOpened ingests fh, opened at path, as it was when st described
// it: the hash and the parse read the same st.Size() bytes, whatever is
// appended to the file meanwhile (a writer still uploading it).
func ingestOpened(cmd *cobra.Command, opts inbox.Options, dec *pgp.Decrypter, source, path string, fh *os.File,
	st os.FileInfo) (*inbox.Report, string, error) {
	var err error
	// The file's SHA-256 is taken on a goroutine of its own, by positioned
	// reads that leave the parse's offset alone, while the file is parsed:
	// the ingest asks for it before it writes (FileInfo.SHA256Of).
	type hashResult struct {
		sum string
		err error
	}
	hashed := make(chan hashResult, 1)
	go func() {
		h := sha256.New()
		_, err := io.Copy(h, io.NewSectionReader(fh, 0, st.Size()))
		hashed <- hashResult{hex.EncodeToString(h.Sum(nil)), err}
	}()
	var got *hashResult
	sum := func() (string, error) {
		if got == nil {
			r := <-hashed
			got = &r
		}
		return got.sum, got.err
	}
	defer sum() // the hash reads fh: done before fh closes
	abs, _ := filepath.Abs(path)
	corr := store.NewCorrelationID()
	info := inbox.FileInfo{Source: source, Path: abs, Size: st.Size(), MTime: st.ModTime().UTC(),
		SHA256Of: sum, CorrelationID: corr, Now: time.Now().UTC()}
	var plain io.ReadSeeker = io.NewSectionReader(fh, 0, st.Size())
	if dec != nil {
		// A message refused is recorded with the file's hash.
		if info.SHA256, err = sum(); err != nil {
			return nil, "", err
		}
		pt, _, err := dec.SpoolWarn(cmd.Context(), fh, "", func(msg string) {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", path, msg)
		})
		if pgp.ReasonOf(err) != "" {
			if l, ok := opts.Store.(inbox.Ledger); ok {
				if _, lerr := l.RecordFileProblem(cmd.Context(), info, inbox.FileRejected, "decrypt: "+err.Error()); lerr != nil {
					return nil, "", fmt.Errorf("rejected (%w), and not recorded: %w", err, lerr)
				}
			}
			return nil, "", fmt.Errorf("rejected: %w", err)
		}
		if err != nil {
			return nil, "", err
		}
		if pt != fh { // else the plaintext is fh, read as st describes it
			defer pt.Close()
			plain = pt
		}
	}
	res, err := inbox.Ingest(cmd.Context(), opts, info, plain)
	return res, corr, err
}

// ingestHeapFloor and ingestGCPercent shape the collector while
// `ediwatch ingest` runs, unless the environment sets GOGC or GOMEMLIMIT
// (tuneIngestGC): the heap is collected when it reaches the larger of
// ingestHeapFloor and 1.5 times what the last collection found live. A
// file's live heap is small, then grows with its sets (their results,
// their group's 999): under the floor, one collection per tens of
// megabytes allocated instead of hundreds of collections of a few, each
// with its fixed costs; above it, a proportional target, which bounds the
// peak without the continuous collections of a fixed limit outgrown.
const (
	ingestHeapFloor = 56 << 20
	ingestGCPercent = 50
)

// tuneIngestGC sets the collector for an ingest (see ingestHeapFloor)
// and returns what restores the previous settings. GOGC is off; the
// memory limit is the target, raised after each collection that finds
// more live than the floor allows for.
func tuneIngestGC() func() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	t := &gcTuner{floor: ingestHeapFloor, percent: ingestGCPercent}
	prevPercent := debug.SetGCPercent(-1)
	prevLimit := debug.SetMemoryLimit(t.floor)
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.stopped = true
		debug.SetMemoryLimit(prevLimit)
		debug.SetGCPercent(prevPercent)
	}
}

// gcTuner keeps the memory limit at max(floor, live × (1 + percent/100)
// + what the runtime holds besides its heap) after every collection, which
// it learns of by a cleanup of an object dropped right away.
type gcTuner struct {
	floor   int64
	percent int64
	// mu orders a collection's new limit and the restore: none is set
	// after it.
	mu      sync.Mutex
	stopped bool
	m       []metrics.Sample
}

// The runtime's metrics gcTuner reads: the live heap, then what the
// memory limit counts (total less released), less the heap's part of it.
var gcTunerMetrics = []string{"/gc/heap/live:bytes", "/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes", "/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes", "/memory/classes/heap/free:bytes"}

// gcSentinel is the object whose cleanup marks a collection; holding a
// pointer, it is never a tiny allocation shared with others.
type gcSentinel struct {
	_ *int
	_ [16]byte
}

func (t *gcTuner) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(t *gcTuner) { t.collected() }, t)
}

// collected runs on the cleanup goroutine after a collection.
func (t *gcTuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	if t.m == nil {
		t.m = make([]metrics.Sample, len(gcTunerMetrics))
		for i, name := range gcTunerMetrics {
			t.m[i].Name = name
		}
	}
	metrics.Read(t.m)
	var v [6]int64
	for i, s := range t.m {
		if s.Value.Kind() != metrics.KindUint64 {
			t.arm()
			return
		}
		v[i] = int64(s.Value.Uint64())
	}
	live, other := v[0], v[1]-v[2]-v[3]-v[4]-v[5]
	debug.SetMemoryLimit(max(t.floor, live+live*t.percent/100+max(other, 0)))
	t.arm()
}
