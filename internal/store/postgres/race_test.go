package postgres

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestIngestRacedOnEveryWriteStillCommits: a file whose runs of sets
// collide, on each write, with another transaction claiming a key of a
// run found unclaimed and committing while the run waits for it (three
// concurrent ingests of overlapping large files do this) is written again
// after the first collision one set at a time, which waits for such a
// claim and then sees it, as every write did before runs were claimed
// set-based: it commits, instead of failing the file after its last write.
// The same when the file is written while it is parsed (PipeFrom 1): a
// write rolled back is retried by parsing the file again.
func TestIngestRacedOnEveryWriteStillCommits(t *testing.T) {
	t.Run("Buffered", func(t *testing.T) { testIngestRacedOnEveryWrite(t, 0) })
	t.Run("Piped", func(t *testing.T) { testIngestRacedOnEveryWrite(t, 1) })
}

func testIngestRacedOnEveryWrite(t *testing.T, pipeFrom int) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	var file bytes.Buffer
	if _, err := (x12gen.Remit{Control: 7, Trace: "RACE", SetsPerGroup: 3*setsPerRun + 1}).Write(&file); err != nil {
		t.Fatal(err)
	}
	dry, err := inbox.Ingest(ctx, inbox.Options{Store: newStore(t), Routes: storetest.Routes}, fileInfo(file.Len()),
		bytes.NewReader(file.Bytes()))
	if err != nil || len(dry.Sets) != 3*setsPerRun+1 {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
	// Before write n, another transaction claims the first set of the
	// file's run n (with other content), and commits once the write waits
	// for it.
	writes := 0
	committed := make(chan error, 3)
	before := func(ctx context.Context) error {
		if writes == 3 {
			return errors.New("written more often than the file has runs")
		}
		key := dry.Sets[writes*setsPerRun].Key
		writes++
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, claimSetSQL, key, "other", "835", "processed", "", nil, "other", "other.835",
			"sha-other", "corr-other", t0, []string{}, []string{}, []string{}, []string{}, [][]byte{}, []string{},
			keySansISA13(key), false); err != nil {
			tx.Rollback(ctx)
			return err
		}
		go func() {
			defer tx.Rollback(context.Background())
			if err := awaitLockWait(s); err != nil {
				committed <- err
				return
			}
			committed <- tx.Commit(context.Background())
		}()
		return nil
	}
	res, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: storetest.Routes, BeforeWrite: before,
		PipeFrom: pipeFrom},
		fileInfo(file.Len()), bytes.NewReader(file.Bytes()))
	for range writes {
		if err := <-committed; err != nil {
			t.Fatalf("the racing claim: %v", err)
		}
	}
	if err != nil {
		t.Fatalf("ingest raced on each of its %d writes: %v", writes, err)
	}
	if writes != 2 || res.Count(inbox.Conflict) != 2 || res.Sets[0].Outcome != inbox.Conflict ||
		res.Sets[setsPerRun].Outcome != inbox.Conflict || res.Count(inbox.Processed) != len(dry.Sets)-2 {
		t.Errorf("%d writes, %d conflicts, %d processed; want 2 writes, the two sets claimed meanwhile conflicts, the others processed",
			writes, res.Count(inbox.Conflict), res.Count(inbox.Processed))
	}
	if c, _ := s.Counts(ctx); c.Outbox[outbox.StatusPending] != len(dry.Sets)-2 {
		t.Errorf("counts %+v, want the processed sets' payments pending", c)
	}
}

// awaitLockWait returns once a session of s's database waits for a lock.
func awaitLockWait(s *Store) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("no write waited for the racing claim")
}
