package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// pass2Reader is data that, in process.File's second pass (after its
// rewind), calls at() once half of the data has been read again, then
// returns what at returned (nil: the read goes on).
type pass2Reader struct {
	*bytes.Reader
	rewound bool
	at      func() error
	read    int
}

func (r *pass2Reader) Seek(off int64, whence int) (int64, error) {
	r.rewound, r.read = true, 0
	return r.Reader.Seek(off, whence)
}

func (r *pass2Reader) Read(p []byte) (int, error) {
	if r.rewound && r.at != nil && r.read >= int(r.Reader.Size())/2 {
		err := r.at()
		r.at = nil
		if err != nil {
			return 0, err
		}
	}
	n, err := r.Reader.Read(p[:min(len(p), 512)])
	r.read += n
	return n, err
}

// TestPipedWriteEndedByTheParseCommitsNothing: a file written while it is
// parsed (PipeFrom 1) whose parse fails halfway (its reader, or its
// context) records nothing, reports the parse's error, and leaves no
// goroutine behind (goleak); the same file ingested whole then has every
// set processed.
func TestPipedWriteEndedByTheParseCommitsNothing(t *testing.T) {
	const sets = 40
	remit := x12gen.Remit{SetsPerGroup: sets, Trace: "PIPE"}
	var buf bytes.Buffer
	if _, err := remit.Write(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	boom := errors.New("injected read error")
	for _, tc := range []struct {
		name string
		at   func(cancel context.CancelFunc) error
		want error
	}{
		{"read error", func(context.CancelFunc) error { return boom }, boom},
		{"canceled", func(cancel context.CancelFunc) error { cancel(); return nil }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s store.Store) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				opts := storetest.Options(t, s)
				opts.PipeFrom = 1
				r := &pass2Reader{Reader: bytes.NewReader(data), at: func() error { return tc.at(cancel) }}
				_, err := inbox.Ingest(ctx, opts, inbox.FileInfo{Source: "test", Path: "cut.835",
					Size: int64(len(data)), MTime: t0, SHA256: "x", CorrelationID: "cut", Now: t0}, r)
				if !errors.Is(err, tc.want) {
					t.Fatalf("ingest: %v, want %v", err, tc.want)
				}
				res := mustIngest(t, s, "whole.835", data)
				if got := res.Count(inbox.Processed); got != sets {
					t.Errorf("%d sets processed after the failed ingest, want %d (%+v)", got, sets, res.Sets)
				}
			})
		})
	}
}

var _ io.ReadSeeker = (*pass2Reader)(nil)
