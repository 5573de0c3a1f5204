package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/migrations"
)

// t0 is the time the payload tests record on their rows.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// storeMigratedBefore opens a store in a fresh schema with the embedded
// migrations before version applied, as a database last migrated by an
// older ediwatch.
func storeMigratedBefore(t *testing.T, version int) *Store {
	t.Helper()
	ctx := context.Background()
	schema := fmt.Sprintf("t_%d_%d", time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	s, err := Open(ctx, testenv.PostgresURL(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		s.Close()
	})
	all, err := migrations.Of("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Version >= version {
			break
		}
		if _, err := s.pool.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := s.pool.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestPayloadStoredAsJSONBBeforeMigration0011: a payment and an
// acknowledgment stored by the claim function of before migration 0011,
// with jsonb payloads, are read after the migration with their payloads
// intact: by a claim, by id, by reconciliation, from the dead letters and
// claimed again once replayed;
// and the set and its effect still decide a re-arrival (a duplicate, and a
// business duplicate under a new key).
func TestPayloadStoredAsJSONBBeforeMigration0011(t *testing.T) {
	ctx := context.Background()
	s := storeMigratedBefore(t, 11)
	const payment = `{"trace":"T1","amount":"1.50","claims":[{"id":"c1","paid":"1.50"}]}`
	const ack = `{"ack":"999","sets":["0001"]}`
	effects := fmt.Sprintf(`[{"kind":"payment.posted","key":"payment:1:T1","ordering_key":"payment:1","sink":"ledger",
		"payload":%s,"hash":"e1"}]`, payment)
	var outcome string
	if err := s.pool.QueryRow(ctx, `SELECT outcome FROM ediwatch_claim_set($1, 'h1', '835', 'processed', '', NULL,
		'test', 'old.835', 'sha-old', 'corr-old', $2, $3)`, "x12:P:ZZ:A:ZZ:B:000000001:A:B:1:835:0001", t0,
		effects).Scan(&outcome); err != nil || outcome != "processed" {
		t.Fatalf("claim before the migration: %q %v", outcome, err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id,
		payload, next_attempt_at, created_at, updated_at, effect_hash)
		VALUES ('ack999:1', 'ack.999', 'ledger', 'ack999:1', '', 'corr-old', $1, $2, $2, $2, 'a1')`, ack, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"payment:1:T1": payment, "ack999:1": ack}
	rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if !sameJSON(r.Payload, []byte(want[r.EffectKey])) {
			t.Errorf("claimed %s: payload %s, want %s", r.EffectKey, r.Payload, want[r.EffectKey])
		}
		if got, err := s.GetOutbox(ctx, r.ID); err != nil || !sameJSON(got.Payload, []byte(want[r.EffectKey])) {
			t.Errorf("outbox row %s: payload %s (%v)", r.EffectKey, got.Payload, err)
		}
	}
	facts, err := store.ReadFacts(ctx, s, t0.Add(-time.Hour), t0.Add(-time.Hour))
	if err != nil || len(facts.Enqueued) != 1 || facts.Enqueued[0].Amount != "1.50" {
		t.Fatalf("reconcile facts: %+v %v", facts.Enqueued, err)
	}
	for _, r := range rows {
		if err := s.Dead(ctx, r.ID, r.LeaseToken, t0, outbox.Failure{HTTPStatus: 400, Error: "HTTP 400",
			DeadEvent: &outbox.DeadEvent{Sink: "chat", Payload: json.RawMessage(`{"outbox_id":1}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := s.ListDead(ctx, outbox.DeadFilter{}, 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters: %d %v", len(dead), err)
	}
	for _, r := range dead {
		if !sameJSON(r.Payload, []byte(want[r.EffectKey])) {
			t.Errorf("dead %s: payload %s, want %s", r.EffectKey, r.Payload, want[r.EffectKey])
		}
	}
	// Replayed, they are claimed again with their payloads intact.
	if n, err := s.Replay(ctx, outbox.DeadFilter{Sink: "ledger"}, t0); err != nil || n != 2 {
		t.Fatalf("replay: %d %v", n, err)
	}
	again, err := s.Claim(ctx, t0.Add(time.Hour), []string{"ledger"}, 10, time.Minute)
	if err != nil || len(again) != 2 {
		t.Fatalf("claim after the replay: %d rows, %v", len(again), err)
	}
	for _, r := range again {
		if !sameJSON(r.Payload, []byte(want[r.EffectKey])) {
			t.Errorf("replayed %s: payload %s, want %s", r.EffectKey, r.Payload, want[r.EffectKey])
		}
	}

	// Re-arrivals after the migration: the same set is a duplicate; the
	// same payment under a new key is a business duplicate.
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "new.835", Size: 1, MTime: t0,
		SHA256: "sha-new", CorrelationID: store.NewCorrelationID(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Rollback()
	eff := []outbox.Effect{{Kind: "payment.posted", Key: "payment:1:T1", OrderingKey: "payment:1", Sink: "ledger",
		Payload: json.RawMessage(payment), Hash: "e1"}}
	for _, key := range []string{"x12:P:ZZ:A:ZZ:B:000000001:A:B:1:835:0001", "x12:P:ZZ:A:ZZ:B:000000002:A:B:1:835:0001"} {
		if err := ing.AddSet(ctx, inbox.SetRecord{Key: key, ContentHash: "h1", Type: "835", Effects: eff}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ing.Commit(ctx, inbox.FileIngested, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sets) != 2 || res.Sets[0].Outcome != inbox.Duplicate || res.Sets[1].Outcome != inbox.BusinessDuplicate {
		t.Fatalf("re-arrivals: %+v, want a duplicate and a business duplicate", res.Sets)
	}
}

// TestNewPayloadsStoredPacked: since migration 0011 a payload is stored
// packed (outbox.PackPayload) in payload_packed, never as jsonb, whether it
// came with a set, as an acknowledgment or as a delivery.dead event; and
// it is read back exactly.
func TestNewPayloadsStoredPacked(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	const payment = `{"trace": "T1",  "amount":1.50, "claims":[{"id":"c1"},{"id":"c2"},{"id":"c3"},{"id":"c4"}]}`
	const ack = `{"ack":"999"}`
	const event = `{"outbox_id" : 1}`
	ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "p.835", Size: 1, MTime: t0,
		SHA256: "sha-p", CorrelationID: store.NewCorrelationID(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Rollback()
	if err := ing.AddSet(ctx, inbox.SetRecord{Key: "x12:P:ZZ:A:ZZ:B:000000001:A:B:1:835:0001", ContentHash: "h1",
		Type: "835", Effects: []outbox.Effect{{Kind: "payment.posted", Key: "payment:1:T1", OrderingKey: "payment:1",
			Sink: "ledger", Payload: json.RawMessage(payment), Hash: "e1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := ing.AddAck(ctx, outbox.Effect{Kind: "ack.999", Key: "ack999:1", OrderingKey: "ack999:1", Sink: "acks",
		Payload: json.RawMessage(ack), Hash: "a1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
		t.Fatal(err)
	}
	r := claimRow(t, s, "ledger")
	if err := s.Dead(ctx, r.ID, r.LeaseToken, t0, outbox.Failure{HTTPStatus: 400, Error: "HTTP 400",
		DeadEvent: &outbox.DeadEvent{Sink: "chat", Payload: json.RawMessage(event)}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"payment:1:T1": payment, "ack999:1": ack, fmt.Sprintf("delivery.dead:%d:1", r.ID): event}
	rows, err := s.pool.Query(ctx, `SELECT effect_key, payload_json IS NULL, payload_packed FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var key string
		var noJSON bool
		var packed []byte
		if err := rows.Scan(&key, &noJSON, &packed); err != nil {
			t.Fatal(err)
		}
		n++
		got, err := outbox.UnpackPayload(packed)
		if !noJSON || len(packed) == 0 || packed[0] != 0x01 || err != nil || string(got) != want[key] {
			t.Errorf("%s: stored jsonb %v, packed % x (%v) = %s; want only packed, of %s", key, !noJSON, packed, err, got, want[key])
		}
	}
	if err := rows.Err(); err != nil || n != len(want) {
		t.Fatalf("%d outbox rows (%v), want %d", n, err, len(want))
	}
	for _, sink := range []string{"acks", "chat"} {
		if r := claimRow(t, s, sink); string(r.Payload) != want[r.EffectKey] {
			t.Errorf("claimed %s: payload %s, want %s", r.EffectKey, r.Payload, want[r.EffectKey])
		}
	}
}

// claimRow claims the one due row of sink.
func claimRow(t *testing.T, s *Store, sink string) outbox.Row {
	t.Helper()
	rows, err := s.Claim(context.Background(), t0, []string{sink}, 10, time.Minute)
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim %s: %d rows, %v", sink, len(rows), err)
	}
	return rows[0]
}

// TestRunDeliveryOrderIsCommitOrder: as TestDeliveryOrderIsCommitOrder,
// for rows inserted by ediwatch_claim_sets, which takes the ordering locks
// and ids of a whole run itself rather than through the trigger: the
// second run of the same sink and ordering key waits for the first
// transaction, so delivery follows commit order.
func TestRunDeliveryOrderIsCommitOrder(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	claim := func(tx pgx.Tx, n int, effect string) {
		t.Helper()
		var outcome string
		if err := tx.QueryRow(ctx, claimSetsSQL+` WHERE n = 2`,
			[]string{fmt.Sprintf("x12:K:%d:a", n), fmt.Sprintf("x12:K:%d:b", n)}, []string{"h", "h"},
			[]string{"837", "837"}, []string{"processed", "processed"}, []string{"", ""}, []*string{nil, nil},
			[]string{"", ""}, "test", "p", "sha", "c", t0, []int32{2, 2}, []string{"claim.received", "claim.received"},
			[]string{effect, effect + ":other"}, []string{"claim:K", "claim:" + effect}, []string{"ledger", "ledger"},
			[][]byte{outbox.PackPayload([]byte(`{}`)), outbox.PackPayload([]byte(`{}`))}, []string{"e", "e"},
			[]bool{false, false},
		).Scan(new(int32), &outcome, new(string), new([]string), new([]string)); err != nil || outcome != "processed" {
			t.Errorf("claim %s: %q %v", effect, outcome, err)
		}
	}
	var mu sync.Mutex
	var committed, delivered []string
	tx1, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	claim(tx1, 1, "first")
	second := make(chan struct{})
	var pid atomic.Int32
	go func() {
		defer close(second)
		tx2, err := s.pool.Begin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer tx2.Rollback(ctx)
		var p int32
		tx2.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&p)
		pid.Store(p)
		claim(tx2, 2, "second")
		if err := tx2.Commit(ctx); err != nil {
			t.Error(err)
		}
		mu.Lock()
		committed = append(committed, "second")
		mu.Unlock()
	}()
	for waiting := false; !waiting; {
		select {
		case <-second:
			waiting = true
		case <-time.After(10 * time.Millisecond):
			var n int
			s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
				AND pid = $1`, pid.Load()).Scan(&n)
			waiting = n > 0
		}
	}
	deliver := func() {
		rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.OrderingKey == "claim:K" {
				delivered = append(delivered, r.EffectKey)
			}
			if err := storetest.Complete(ctx, s, r.ID, r.LeaseToken, t0, 200); err != nil {
				t.Fatal(err)
			}
		}
	}
	deliver() // while the first transaction is open
	mu.Lock()
	if err := tx1.Commit(ctx); err != nil {
		mu.Unlock()
		t.Fatal(err)
	}
	committed = append(committed, "first")
	mu.Unlock()
	<-second
	for range 3 {
		deliver()
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(delivered) != "[first second]" || fmt.Sprint(committed) != "[first second]" {
		t.Errorf("committed %v, delivered %v; want both first, second", committed, delivered)
	}
}

// TestRunRacingAConcurrentClaimIsWrittenAgain: a run of sets whose keys a
// concurrent transaction claims (not yet committed when the run looked)
// waits for it and, when it commits, fails as transient (the ingestion is
// rolled back and nothing of it stays); written again, the same sets are
// duplicates of that claim.
func TestRunRacingAConcurrentClaimIsWrittenAgain(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	keys := []string{"x12:R:1", "x12:R:2"}
	tx1, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	rows, err := tx1.Query(ctx, claimSetsSQL, keys, []string{"h1", "h2"}, []string{"835", "835"},
		[]string{"processed", "processed"}, []string{"", ""}, []*string{nil, nil}, []string{"", ""}, "test", "first",
		"sha", "corr-first", t0, []int32{}, []string{}, []string{}, []string{}, []string{}, [][]byte{}, []string{},
		[]bool{false, false})
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	ingest := func() (*inbox.IngestResult, error) {
		ing, err := s.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "second", Size: 1, MTime: t0,
			SHA256: "sha2", CorrelationID: store.NewCorrelationID(), Now: t0})
		if err != nil {
			return nil, err
		}
		defer ing.Rollback()
		for i, k := range keys {
			if err := ing.AddSet(ctx, inbox.SetRecord{Key: k, ContentHash: fmt.Sprintf("h%d", i+1), Type: "835",
				Effects: []outbox.Effect{{Kind: "payment.posted", Key: "payment:" + k, OrderingKey: "payment:" + k,
					Sink: "ledger", Payload: json.RawMessage(`{}`), Hash: "e"}}}); err != nil {
				return nil, err
			}
		}
		return ing.Commit(ctx, inbox.FileIngested, "")
	}
	done := make(chan error, 1)
	go func() {
		_, err := ingest()
		done <- err
	}()
	waitForLockWait(t, s)
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrTransient) {
		t.Fatalf("the racing run: %v, want ErrTransient", err)
	}
	if c, _ := s.Counts(ctx); c.Outbox[outbox.StatusPending] != 0 || c.Sightings["duplicate"] != 0 {
		t.Fatalf("the rolled-back run left rows: %+v", c)
	}
	res, err := ingest()
	if err != nil || len(res.Sets) != 2 || res.Sets[0].Outcome != inbox.Duplicate || res.Sets[1].Outcome != inbox.Duplicate ||
		res.Sets[0].OriginalCorrelationID != "corr-first" {
		t.Fatalf("written again: %+v %v, want two duplicates of the first claim", res, err)
	}
}

// TestABuildBeforePackedPayloadsCannotReadThem: a build of ediwatch from
// before payloads were packed read the payload column alone and would
// deliver a packed row's NULL; after migration 0012 every statement of
// such a build that names the column fails instead (it delivers nothing,
// loudly), and its claim function is gone.
func TestABuildBeforePackedPayloadsCannotReadThem(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*Store)
	for _, q := range []string{
		"SELECT payload FROM outbox",
		`INSERT INTO outbox (effect_key, kind, sink, ordering_key, correlation_id, payload, next_attempt_at,
			created_at, updated_at) VALUES ('k', 'payment.posted', 'ledger', 'o', 'c', '{}', now(), now(), now())`,
		`SELECT * FROM ediwatch_claim_set('k', 'h', '835', 'processed', '', NULL, 's', 'p', 'f', 'c', now(), '[]'::jsonb)`,
	} {
		if _, err := s.pool.Exec(ctx, q); err == nil {
			t.Errorf("%s: no error", q)
		}
	}
}
