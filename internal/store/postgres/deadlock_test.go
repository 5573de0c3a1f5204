package postgres

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestDeadlockedIngestIsWrittenAgain: an ingest whose transaction
// PostgreSQL aborts to break a deadlock over ordering keys (another
// transaction holds the second key and then asks for the first) is
// written again from its spilled records and succeeds, instead of failing
// the file's attempt.
func TestDeadlockedIngestIsWrittenAgain(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	var file bytes.Buffer
	if _, err := (x12gen.Remit{Control: 5, Trace: "DL", SetsPerGroup: 2}).Write(&file); err != nil {
		t.Fatal(err)
	}
	// The two payments' ordering keys, in file order, from a dry run in
	// another schema.
	dry := newStore(t)
	res, err := inbox.Ingest(ctx, inbox.Options{Store: dry, Routes: storetest.Routes}, fileInfo(file.Len()),
		bytes.NewReader(file.Bytes()))
	if err != nil || len(res.Sets) != 2 || len(res.Sets[0].EffectKeys) != 1 || len(res.Sets[1].EffectKeys) != 1 {
		t.Fatalf("dry run: %v %+v", err, res)
	}
	first, second := res.Sets[0].EffectKeys[0], res.Sets[1].EffectKeys[0] // payment keys are their ordering keys
	lock := `INSERT INTO outbox_order (sink, ordering_key, touched_at) VALUES ('ledger', $1, now())
		ON CONFLICT (sink, ordering_key) DO UPDATE SET touched_at = excluded.touched_at`

	// Another transaction holds the second key; it will wait long before
	// it looks for a deadlock, so the ingest is the one PostgreSQL aborts.
	other, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, "SET LOCAL deadlock_timeout = '60s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, lock, second); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var got *inbox.Report
	go func() {
		var err error
		got, err = inbox.Ingest(ctx, inbox.Options{Store: s, Routes: storetest.Routes}, fileInfo(file.Len()),
			bytes.NewReader(file.Bytes()))
		done <- err
	}()
	// Once the ingest holds the first key and waits for the second, the
	// other transaction asks for the first: a deadlock.
	waitForLockWait(t, s)
	if _, err := other.Exec(ctx, lock, first); err != nil {
		t.Fatalf("the other transaction was aborted, not the ingest: %v", err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ingest after a deadlock: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ingest did not finish")
	}
	if got.Count(inbox.Processed) != 2 {
		t.Errorf("sets %+v, want both processed", got.Sets)
	}
	if c, _ := s.Counts(ctx); c.Outbox[outbox.StatusPending] != 3 { // two payments and a 999
		t.Errorf("outbox %v", c.Outbox)
	}
}

func fileInfo(size int) inbox.FileInfo {
	now := time.Now().UTC()
	return inbox.FileInfo{Source: "dl", Path: "dl.835", Size: int64(size), MTime: now, SHA256: "dl",
		CorrelationID: store.NewCorrelationID(), Now: now}
}

// waitForLockWait returns once a session of s's database waits for a row
// lock.
func waitForLockWait(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the ingest never waited for the second key")
}
