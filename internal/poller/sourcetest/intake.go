package sourcetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// RunIntake runs the poller's intake scenarios over src: stalled uploads,
// min_age, done markers, names reused while their previous file is being
// ingested, and a crash after a claim. The local source and real OpenSSH
// pass the same scenarios.
func RunIntake(t *testing.T, src poller.Source, newDrop func(t *testing.T) Drop) {
	for _, after := range []string{"leave", "delete"} {
		t.Run("StalledUploadWaitsForItsIEA/"+after, func(t *testing.T) {
			d := newDrop(t)
			full := payment(1)
			write(t, d, "era.835", string(full[:len(full)/2]))
			h := newIntake(t, src, d, func(c *poller.Config) { c.After = after })
			h.polls(3)
			if c := h.counts(); sum(c.Files)+sum(c.Inbox) != 0 {
				t.Fatalf("a stalled upload was recorded: %+v", c)
			}
			// Still under its name, for the partner to finish.
			appendTo(t, d, "era.835", full[len(full)/2:])
			h.polls(2)
			if c := h.counts(); c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 || c.Files["ingested"] != 1 {
				t.Errorf("after the upload completed: %+v", c)
			}
		})
	}
	// An upload that stalls before its first bytes (or within "ISA") is
	// an upload under way too: not rejected, and never deleted or moved
	// from under the partner.
	for _, start := range []string{"", "I", "IS", "ISA", "\r\n"} {
		t.Run(fmt.Sprintf("UploadStalledAtItsFirstBytesWaits/%q", start), func(t *testing.T) {
			d := newDrop(t)
			write(t, d, "era.835", start)
			h := newIntake(t, src, d, func(c *poller.Config) { c.After = "delete" })
			h.polls(3)
			if c := h.counts(); sum(c.Files)+sum(c.Inbox) != 0 {
				t.Fatalf("an upload stalled at %q was recorded: %+v", start, c)
			}
			full := payment(5)
			replace(t, d, "era.835", full)
			h.polls(3)
			if c := h.counts(); c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 || c.Files["ingested"] != 1 {
				t.Errorf("after the upload completed: %+v", c)
			}
			h.empty(t)
		})
	}
	t.Run("EmptyFileRejectedAfterGrace", func(t *testing.T) {
		d := newDrop(t)
		write(t, d, "era.835", "")
		age(t, d, "era.835", 11*time.Minute)
		h := newIntake(t, src, d, func(c *poller.Config) { c.After = "delete" })
		h.polls(2)
		if c := h.counts(); c.Files["rejected"] != 1 || c.Inbox["rejected"] != 1 {
			t.Errorf("an empty file older than the grace: %+v, want it rejected as it is", c)
		}
		h.empty(t)
	})
	t.Run("StalledUploadRejectedAfterGrace", func(t *testing.T) {
		d := newDrop(t)
		full := payment(2)
		write(t, d, "era.835", string(full[:len(full)/2]))
		age(t, d, "era.835", 11*time.Minute)
		h := newIntake(t, src, d, nil)
		h.polls(2)
		if c := h.counts(); c.Inbox["rejected"] != 1 || c.Files["ingested"] != 1 {
			t.Errorf("an upload stalled beyond the grace: %+v, want rejected as it is", c)
		}
	})
	t.Run("MinAge", func(t *testing.T) {
		d := newDrop(t)
		write(t, d, "era.835", string(payment(3)))
		h := newIntake(t, src, d, func(c *poller.Config) { c.MinAge = time.Hour })
		h.polls(2)
		if c := h.counts(); sum(c.Files) != 0 {
			t.Fatalf("took a file younger than min_age: %+v", c)
		}
		age(t, d, "era.835", 2*time.Hour)
		h.polls(2)
		if c := h.counts(); c.Inbox["processed"] != 1 {
			t.Errorf("an old enough file: %+v", c)
		}
	})
	t.Run("DoneMarker", func(t *testing.T) {
		d := newDrop(t)
		write(t, d, "era.835", string(payment(4)))
		h := newIntake(t, src, d, func(c *poller.Config) {
			c.Include, c.DoneMarker, c.After = []string{"*"}, "{name}.done", "delete"
		})
		h.polls(3)
		if c := h.counts(); sum(c.Files) != 0 {
			t.Fatalf("took a file without its done marker: %+v", c)
		}
		write(t, d, "era.835.done", "")
		h.polls(3)
		if c := h.counts(); c.Inbox["processed"] != 1 || c.Files["ingested"] != 1 || sum(c.Files) != 1 {
			t.Errorf("with its marker: %+v (the marker itself is never ingested)", c)
		}
		h.empty(t)
	})
	// The partner uploads a new file under the name of one being ingested.
	for _, when := range []string{"AfterClaim", "DuringDownload", "WithoutRename"} {
		t.Run("ReusedName"+when, func(t *testing.T) {
			d := newDrop(t)
			write(t, d, "ERA835.txt", string(payment(10)))
			// Over SFTP an mtime has whole seconds: without a claim, only
			// another size tells a new version from the one ingested.
			next := payment(11)
			if when == "WithoutRename" {
				next = payment(111)
			}
			var once sync.Once
			replace := func() { once.Do(func() { replace(t, d, "ERA835.txt", next) }) }
			hs := &hooked{Source: src}
			switch when {
			case "AfterClaim":
				hs.afterClaim = replace
			case "DuringDownload":
				hs.onOpen = replace
			case "WithoutRename":
				hs.onOpen, hs.refuseClaims = replace, true
			}
			h := newIntake(t, hs, d, func(c *poller.Config) { c.Include, c.After = []string{"*.txt"}, "delete" })
			h.polls(2)
			if c := h.counts(); c.Inbox["processed"] != 1 {
				t.Fatalf("first version: %+v", c)
			}
			if b := h.remaining(t); len(b) != 1 || !bytes.Equal(b[0], next) {
				t.Fatalf("the new version was not left in the drop: %d files", len(b))
			}
			h.polls(3)
			if c := h.counts(); c.Inbox["processed"] != 2 || c.Sightings["duplicate"] != 0 {
				t.Errorf("the new version was not ingested on a later poll: %+v", c)
			}
			h.empty(t)
		})
	}
	runMarkerClaims(t, src, newDrop)
	t.Run("CrashAfterClaimIsFinished", func(t *testing.T) {
		d := newDrop(t)
		// A poller claimed the file and died before its ingest committed.
		write(t, d, "era.835.ediwatch-0123456789abcdef0123", string(payment(20)))
		h := newIntake(t, src, d, func(c *poller.Config) { c.After = "delete" })
		h.polls(2)
		c := h.counts()
		states, _ := h.st.FileStates(context.Background(), "acme", []string{path.Join(d.Remote, "era.835")})
		if c.Inbox["processed"] != 1 || states[path.Join(d.Remote, "era.835")].Status != inbox.FileIngested {
			t.Errorf("a claimed file left by a crash: %+v, ledger %+v (recorded under its original name)", c, states)
		}
		h.empty(t)
	})
}

type intake struct {
	t  *testing.T
	p  *poller.Poller
	st store.Store
	d  Drop
}

func newIntake(t *testing.T, src poller.Source, d Drop, mod func(*poller.Config)) *intake {
	st := drivertest.SQLite(t)
	cfg := poller.Config{Name: "acme", Directories: []string{d.Remote}, PollInterval: time.Second,
		Include: []string{"*.835"}, RetryBase: time.Nanosecond, RetryMax: time.Nanosecond, SpoolDir: t.TempDir()}
	if mod != nil {
		mod(&cfg)
	}
	p := poller.New(cfg, src, st, inbox.Options{Routes: storetest.Routes}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	return &intake{t: t, p: p, st: st, d: d}
}

func (h *intake) polls(n int) {
	h.t.Helper()
	for range n {
		if _, err := h.p.PollOnce(context.Background()); err != nil {
			h.t.Fatalf("poll: %v", err)
		}
	}
}

func (h *intake) counts() store.Counts {
	c, err := h.st.Counts(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// remaining returns the content of the regular files left in the drop.
func (h *intake) remaining(t *testing.T) [][]byte {
	entries, _ := os.ReadDir(h.d.Local)
	var out [][]byte
	for _, e := range entries {
		if e.Type().IsRegular() {
			b, _ := os.ReadFile(filepath.Join(h.d.Local, e.Name()))
			out = append(out, b)
		}
	}
	return out
}

func (h *intake) empty(t *testing.T) {
	t.Helper()
	if entries, _ := os.ReadDir(h.d.Local); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the drop still holds %v", names)
	}
}

// hooked injects the partner's actions into a source's calls.
type hooked struct {
	poller.Source
	onOpen       func() // at the download, before the claim
	afterClaim   func() // right after the rename to a processing name
	refuseClaims bool   // the server refuses renames (no claim possible)
	// beforeRename and afterRename see every rename (and its result).
	beforeRename func(from, to string)
	afterRename  func(from, to string, err error)
}

func (h *hooked) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	rc, err := h.Source.Open(ctx, p)
	if err == nil && h.onOpen != nil {
		h.onOpen()
	}
	return rc, err
}

func (h *hooked) Rename(ctx context.Context, from, to string) error {
	claim := strings.Contains(path.Base(to), ".ediwatch-")
	if claim && h.refuseClaims {
		return errors.New("permission denied")
	}
	if h.beforeRename != nil {
		h.beforeRename(from, to)
	}
	err := h.Source.Rename(ctx, from, to)
	if h.afterRename != nil {
		h.afterRename(from, to, err)
	}
	if err == nil && claim && h.afterClaim != nil {
		h.afterClaim()
	}
	return err
}

// payment returns a one-payment 835, unique to i.
func payment(i int) []byte {
	var b bytes.Buffer
	x12gen.Remit{Control: 7000 + i, Trace: fmt.Sprintf("INTAKE%d-", i), EOL: "\n"}.Write(&b)
	return b.Bytes()
}

func appendTo(t *testing.T, d Drop, name string, b []byte) {
	f, err := os.OpenFile(filepath.Join(d.Local, name), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// replace puts a new file under name, as an upload that replaces it does.
func replace(t *testing.T, d Drop, name string, b []byte) {
	tmp := filepath.Join(d.Local, "."+name+".part")
	if err := os.WriteFile(tmp, b, 0o666); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(d.Local, name)); err != nil {
		t.Error(err)
	}
}

func age(t *testing.T, d Drop, name string, by time.Duration) {
	when := time.Now().Add(-by)
	if err := os.Chtimes(filepath.Join(d.Local, name), when, when); err != nil {
		t.Fatal(err)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// runMarkerClaims runs the scenarios of done markers claimed with their
// files: a reused name's next upload and its marker, uploads that replace
// a file between its listing and its claim, crashes between the claims,
// and claims that belong to another source.
func runMarkerClaims(t *testing.T, src poller.Source, newDrop func(t *testing.T) Drop) {
	markers := func(c *poller.Config) { c.DoneMarker, c.After = "{name}.done", "delete" }
	const id = ".ediwatch-0123456789abcdef0123"
	isFileClaim := func(to string) bool {
		return strings.HasPrefix(path.Base(to), "era.835.ediwatch-")
	}
	t.Run("ReusedNameKeepsNextUploadsDoneMarker", func(t *testing.T) {
		d := newDrop(t)
		write(t, d, "era.835", string(payment(30)))
		write(t, d, "era.835.done", "")
		next := payment(31)
		var once sync.Once
		hs := &hooked{Source: src, afterRename: func(_, to string, err error) {
			if err == nil && isFileClaim(to) {
				// While the claimed file downloads, the partner uploads the
				// next one under the name, and its marker.
				once.Do(func() {
					replace(t, d, "era.835", next)
					write(t, d, "era.835.done", "")
				})
			}
		}}
		h := newIntake(t, hs, d, markers)
		h.polls(2)
		if c := h.counts(); c.Inbox["processed"] != 1 {
			t.Fatalf("first upload: %+v", c)
		}
		if b, err := os.ReadFile(filepath.Join(d.Local, "era.835.done")); err != nil || len(b) != 0 {
			t.Fatalf("the next upload's done marker was taken: %v", err)
		}
		h.polls(3)
		if c := h.counts(); c.Inbox["processed"] != 2 {
			t.Errorf("the next upload was not taken with its own marker: %+v", c)
		}
		h.empty(t)
	})
	// The partner starts a new upload under the name between the listing
	// and the claim.
	for _, when := range []string{"RemovingItsMarker", "AfterTheMarkerClaim"} {
		t.Run("UploadStartedBeforeClaimIsLeftToFinish"+when, func(t *testing.T) {
			d := newDrop(t)
			write(t, d, "era.835", string(payment(40)))
			write(t, d, "era.835.done", "")
			full := payment(41)
			part := full[:len(full)/2]
			var once sync.Once
			hs := &hooked{Source: src, beforeRename: func(_, to string) {
				// Before the first claim, or before the file's claim.
				if when == "RemovingItsMarker" && strings.Contains(path.Base(to), ".ediwatch-") ||
					when == "AfterTheMarkerClaim" && isFileClaim(to) {
					once.Do(func() {
						if when == "RemovingItsMarker" {
							os.Remove(filepath.Join(d.Local, "era.835.done"))
						}
						replace(t, d, "era.835", part)
					})
				}
			}}
			h := newIntake(t, hs, d, markers)
			h.polls(4)
			if c := h.counts(); sum(c.Files)+sum(c.Inbox) != 0 {
				t.Fatalf("an upload in progress was taken: %+v", c)
			}
			if b, err := os.ReadFile(filepath.Join(d.Local, "era.835")); err != nil || !bytes.Equal(b, part) {
				t.Fatalf("the upload in progress is not under its name for the partner to finish: %v", err)
			}
			// The partner finishes its upload, then writes its marker.
			replace(t, d, "era.835", full)
			write(t, d, "era.835.done", "")
			h.polls(3)
			if c := h.counts(); c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 || c.Files["ingested"] != 1 {
				t.Errorf("the finished upload: %+v, want it taken whole", c)
			}
			h.empty(t)
		})
	}
	t.Run("CrashBetweenMarkerAndFileClaimHandsTheMarkerBack", func(t *testing.T) {
		d := newDrop(t)
		// A poller claimed the marker and died before claiming the file.
		write(t, d, "era.835", string(payment(50)))
		write(t, d, "era.835.done"+id, "")
		h := newIntake(t, src, d, markers)
		h.polls(1)
		if _, err := os.Stat(filepath.Join(d.Local, "era.835.done")); err != nil {
			t.Fatalf("the claimed marker was not handed back: %v", err)
		}
		h.polls(3)
		if c := h.counts(); c.Inbox["processed"] != 1 || sum(c.Files) != 1 {
			t.Errorf("the file with its handed-back marker: %+v", c)
		}
		h.empty(t)
	})
	t.Run("CrashBetweenMarkerAndFileClaimDropsAStaleMarker", func(t *testing.T) {
		d := newDrop(t)
		// As above, and the partner has written the marker again since.
		write(t, d, "era.835", string(payment(51)))
		write(t, d, "era.835.done"+id, "stale")
		write(t, d, "era.835.done", "")
		h := newIntake(t, src, d, markers)
		h.polls(4)
		if c := h.counts(); c.Inbox["processed"] != 1 || sum(c.Files) != 1 {
			t.Errorf("the file with its marker: %+v", c)
		}
		h.empty(t)
	})
	t.Run("CrashAfterBothClaimsFinishesThePair", func(t *testing.T) {
		d := newDrop(t)
		// A poller claimed marker and file and died before post-processing.
		write(t, d, "era.835"+id, string(payment(52)))
		write(t, d, "era.835.done"+id, "")
		h := newIntake(t, src, d, markers)
		h.polls(3)
		if c := h.counts(); c.Inbox["processed"] != 1 || sum(c.Files) != 1 {
			t.Fatalf("the claimed pair: %+v", c)
		}
		h.empty(t)
		// The next upload under the name waits for its own marker.
		write(t, d, "era.835", string(payment(53)))
		h.polls(3)
		if c := h.counts(); c.Inbox["processed"] != 1 {
			t.Fatalf("the next upload was taken before its marker: %+v", c)
		}
		write(t, d, "era.835.done", "")
		h.polls(3)
		if c := h.counts(); c.Inbox["processed"] != 2 {
			t.Errorf("the next upload with its marker: %+v", c)
		}
		h.empty(t)
	})
	t.Run("ClaimsOfAnotherSourceAreLeftAlone", func(t *testing.T) {
		d := newDrop(t)
		// Another source on the directory, taking *.837, has claimed a
		// file and its marker, and only the marker of another.
		write(t, d, "claims.837"+id, string(payment(54)))
		write(t, d, "claims.837.done"+id, "")
		write(t, d, "other.837.done"+id, "")
		h := newIntake(t, src, d, markers)
		h.polls(3)
		if c := h.counts(); sum(c.Files)+sum(c.Inbox) != 0 {
			t.Errorf("took another source's claim: %+v", c)
		}
		for _, name := range []string{"claims.837" + id, "claims.837.done" + id, "other.837.done" + id} {
			if _, err := os.Stat(filepath.Join(d.Local, name)); err != nil {
				t.Errorf("another source's claim was touched: %v", err)
			}
		}
	})
}
