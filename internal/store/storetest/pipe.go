package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// testAckNumbersWhileWriting: files written while they are parsed
// (inbox.Options.PipeFrom 1) number their 999s while their write is open —
// on SQLite through the ingestion's own transaction, since the store's
// reservation would wait for the write lock that ingestion holds — beside
// other such ingests and direct reservations of the same sender. Every
// number handed out, to an acknowledgment or directly, is unique, and each
// 999 carries the same number in ISA13 and GS06. A write rolled back takes
// its acknowledgments with it: a later ingest may use its numbers again,
// as none of them was sent.
func testAckNumbersWhileWriting(t *testing.T, s store.Store) {
	ctx := context.Background()
	const files, groups = 4, 3
	opts := Options(t, s)
	opts.PipeFrom = 1
	ingest := func(ctx context.Context, i int) (*inbox.Report, error) {
		data := remitBytes(t, x12gen.Remit{Control: 100 * (i + 1), Interchanges: groups,
			Trace: fmt.Sprintf("ACK%d-", i)}, 2)
		return inbox.Ingest(ctx, opts, inbox.FileInfo{Source: "test", Path: fmt.Sprint("acks", i, ".835"),
			Size: int64(len(data)), MTime: t0, SHA256: fmt.Sprint("sha-acks", i),
			CorrelationID: store.NewCorrelationID(), Now: t0}, bytes.NewReader(data))
	}
	// The acknowledgments' sender: the files' receiver, as ours.
	const sender = "ZZ:RIVERSIDE"

	// A rolled-back ingest first: its acknowledgments are not recorded.
	boom := errors.New("injected")
	if _, err := ingest(store.FailBeforeCommit(ctx, boom), files); !errors.Is(err, boom) {
		t.Fatalf("failed ingest: %v, want %v", err, boom)
	}

	var mu sync.Mutex
	var direct []int64
	var wg sync.WaitGroup
	for i := range files {
		wg.Go(func() {
			r, err := ingest(ctx, i)
			if err != nil {
				t.Errorf("file %d: %v", i, err)
				return
			}
			if len(r.AckKeys) != groups || r.Count(inbox.Processed) != 2*groups {
				t.Errorf("file %d: %d acknowledgments, %d sets processed", i, len(r.AckKeys),
					r.Count(inbox.Processed))
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			n, err := s.NextControlNumber(ctx, sender)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			direct = append(direct, n)
			mu.Unlock()
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}

	seen := map[int64]string{}
	use := func(n int64, what string) {
		if prev, ok := seen[n]; ok {
			t.Errorf("control number %d given twice: %s and %s", n, prev, what)
		}
		seen[n] = what
	}
	for _, n := range direct {
		use(n, "a direct reservation")
	}
	// One ordering key: claimed one at a time, each delivered before the
	// next.
	var rows []outbox.Row
	for {
		batch, err := s.Claim(ctx, t0, []string{"acks"}, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) == 0 {
			break
		}
		for _, r := range batch {
			if _, err := s.CompleteMany(ctx, []outbox.Completion{{ID: r.ID, Token: r.LeaseToken, HTTPStatus: 200}},
				t0); err != nil {
				t.Fatal(err)
			}
		}
		rows = append(rows, batch...)
	}
	if len(rows) != files*groups {
		t.Fatalf("%d acknowledgment rows, want %d", len(rows), files*groups)
	}
	for _, r := range rows {
		var ev struct{ X12 string }
		if err := json.Unmarshal(r.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		isa13, gs06 := ackControlNumbers(t, ev.X12)
		if isa13 != gs06 {
			t.Errorf("%s: ISA13 %d, GS06 %d", r.EffectKey, isa13, gs06)
		}
		use(isa13, r.EffectKey)
	}
}

// ackControlNumbers returns ISA13 and GS06 of an acknowledgment's
// interchange (delimiters: ISA's fourth byte, the byte after ISA16).
func ackControlNumbers(t *testing.T, x12 string) (isa13, gs06 int64) {
	t.Helper()
	if len(x12) < 106 {
		t.Fatalf("acknowledgment too short: %q", x12)
	}
	elem, term := string(x12[3]), string(x12[105])
	for _, seg := range strings.Split(x12, term) {
		f := strings.Split(strings.TrimSpace(seg), elem)
		switch {
		case f[0] == "ISA" && len(f) > 13:
			isa13, _ = strconv.ParseInt(f[13], 10, 64)
		case f[0] == "GS" && len(f) > 6:
			gs06, _ = strconv.ParseInt(f[6], 10, 64)
		}
	}
	if isa13 == 0 || gs06 == 0 {
		t.Fatalf("no ISA13 or GS06 in %q", x12)
	}
	return isa13, gs06
}

// stallingReader is a file that, read the second time (process.File
// reads its envelope first, then rewinds), stops at offset at until
// release is closed, having closed reached.
type stallingReader struct {
	*bytes.Reader
	at               int64
	rewound          bool
	once             sync.Once
	reached, release chan struct{}
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if r.rewound && r.Size()-int64(r.Len()) >= r.at {
		r.once.Do(func() { close(r.reached) })
		<-r.release
	}
	return r.Reader.Read(p)
}

func (r *stallingReader) Seek(off int64, whence int) (int64, error) {
	r.rewound = true
	return r.Reader.Seek(off, whence)
}

// testAckNumberWhileAReservationWaits: a file written while it is parsed
// numbers its 999 while a reservation of the same sender's block waits
// for the store (on SQLite, for the write lock that very ingestion
// holds): the ingestion neither waits for the reservation nor hands out a
// number of it, and both complete.
func testAckNumberWhileAReservationWaits(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sender = "ZZ:RIVERSIDE" // the acknowledgments' sender: the file's receiver
	data := remitBytes(t, x12gen.Remit{Trace: "WAIT-", ClaimsPerSet: 4}, 600)
	r := &stallingReader{Reader: bytes.NewReader(data), at: int64(len(data)) / 2,
		reached: make(chan struct{}), release: make(chan struct{})}
	opts := Options(t, s)
	opts.PipeFrom = 1
	type result struct {
		r   *inbox.Report
		n   int64
		err error
	}
	ingested, reserved := make(chan result, 1), make(chan result, 1)
	go func() {
		rep, err := inbox.Ingest(ctx, opts, inbox.FileInfo{Source: "test", Path: "wait.835", Size: int64(len(data)),
			MTime: t0, SHA256: "sha-wait", CorrelationID: store.NewCorrelationID(), Now: t0}, r)
		ingested <- result{r: rep, err: err}
	}()
	select {
	case <-r.reached: // half the sets written: the ingestion's write is open
	case res := <-ingested:
		t.Fatalf("ingest ended before its file was half read: %v", res.err)
	}
	go func() {
		n, err := s.NextControlNumber(ctx, sender)
		reserved <- result{n: n, err: err}
	}()
	// Not a timed assertion: the pause lets the reservation start waiting
	// before the file's 999 asks for its number; a shorter wait would only
	// test less.
	time.Sleep(300 * time.Millisecond)
	close(r.release)
	in, res := <-ingested, <-reserved
	if in.err != nil || res.err != nil {
		t.Fatalf("ingest: %v; reservation: %v", in.err, res.err)
	}
	if len(in.r.AckKeys) != 1 {
		t.Fatalf("%d acknowledgments", len(in.r.AckKeys))
	}
	rows, err := s.Claim(ctx, t0, []string{"acks"}, 10, time.Minute)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%d acknowledgment rows, %v", len(rows), err)
	}
	var ev struct{ X12 string }
	if err := json.Unmarshal(rows[0].Payload, &ev); err != nil {
		t.Fatal(err)
	}
	if isa13, _ := ackControlNumbers(t, ev.X12); isa13 == res.n {
		t.Errorf("control number %d given to the 999 and to the reservation", isa13)
	}
}
