package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store/history"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
)

// recorder is a pgx.QueryTracer that keeps the statements run while on.
type recorder struct {
	mu    sync.Mutex
	on    bool
	stmts []recorded
}

type recorded struct {
	sql  string
	args []any
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.stmts = append(r.stmts, recorded{d.SQL, d.Args})
	}
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements recorded since the last take and stops
// recording.
func (r *recorder) take() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.stmts
	r.stmts, r.on = nil, false
	return out
}

func (r *recorder) start() {
	r.mu.Lock()
	r.on = true
	r.mu.Unlock()
}

// TestNoPeriodicOrInteractiveStatementReadsAllHistory: every statement
// the gauges, the console, the CLI (dlq, reconcile, sink), the relay and
// pruning issue is planned, on a store holding a month of history, with
// no sequential scan of a table that grows with history. A statement
// that cannot be served by an index (a count of every delivered row, an
// unindexed time window) fails here.
func TestNoPeriodicOrInteractiveStatementReadsAllHistory(t *testing.T) {
	rec := &recorder{}
	s := pgtest.New(t, postgres.Options{Tracer: rec})
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if err := history.Postgres(ctx, s.Pool(), 6000, 60, now, nil); err != nil {
		t.Fatal(err)
	}
	// A backlog the statistics have not seen, as at a year of history,
	// where the outbox's autoanalyze waits for a tenth of its rows to
	// change: 1,500 payments pending at one sink, each its own ordering
	// key.
	if _, err := s.Pool().Exec(ctx, `INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key,
		correlation_id, payload_packed, next_attempt_at, created_at, updated_at, effect_hash)
		SELECT 'payment:backlog:' || g, 'payment.posted', 'ledger', 'payment:backlog:' || g, '', 'backlog',
			$2::bytea, $1, $1, $1, md5(g::text) FROM generate_series(1, 1500) g`, now.Add(-time.Minute),
		outbox.PackPayload([]byte(`{"payer_id":"P","amount":"1.00"}`))); err != nil {
		t.Fatal(err)
	}

	day := now.Add(-24 * time.Hour)
	calls := []struct {
		name string
		call func() error
	}{
		{"Stats", func() error { _, err := s.Stats(ctx, now); return err }},
		{"Reconcile24h", func() error { _, err := reconcile.Run(ctx, s, day, time.Hour, now); return err }},
		{"LastFileTimes", func() error { _, err := s.LastFileTimes(ctx); return err }},
		{"Activity", func() error { _, err := s.Activity(ctx, day); return err }},
		{"AttemptStats", func() error { _, err := s.AttemptStats(ctx, now.Add(-time.Hour)); return err }},
		{"ListFiles", func() error { _, err := s.ListFiles(ctx, inbox.FileFilter{}, 501); return err }},
		{"ListFilesRejected", func() error {
			_, err := s.ListFiles(ctx, inbox.FileFilter{Status: inbox.FileStatus("rejected")}, 501)
			return err
		}},
		{"ListFilesWindow", func() error {
			_, err := s.ListFiles(ctx, inbox.FileFilter{Source: "src1", Since: day, Until: now}, 501)
			return err
		}},
		{"FileOutcomes", func() error {
			_, err := s.FileOutcomes(ctx, []string{history.CorrelationID(5990), history.CorrelationID(5991)})
			return err
		}},
		{"FileDetail", func() error { _, err := s.FileDetail(ctx, history.CorrelationID(5990), 500); return err }},
		{"ListDeadBrief", func() error { _, err := s.ListDeadBrief(ctx, outbox.DeadFilter{}, 501); return err }},
		{"ListDeadBriefSink", func() error {
			_, err := s.ListDeadBrief(ctx, outbox.DeadFilter{Sink: "acks", Since: day}, 501)
			return err
		}},
		{"ListDead", func() error { _, err := s.ListDead(ctx, outbox.DeadFilter{Kind: "payment.posted"}, 10000); return err }},
		{"CountDead", func() error { _, err := s.CountDead(ctx, outbox.DeadFilter{}); return err }},
		{"PollStatuses", func() error { _, err := s.PollStatuses(ctx); return err }},
		{"LeaseStates", func() error { _, err := s.LeaseStates(ctx); return err }},
		{"SinkStates", func() error { _, err := s.SinkStates(ctx); return err }},
		{"Claim", func() error { _, err := s.Claim(ctx, now, []string{"ledger", "acks"}, 64, time.Minute); return err }},
		{"ReapExpired", func() error { _, err := s.ReapExpired(ctx, now); return err }},
		// Maintenance folds the closed days; reconciliation of a week
		// reads their rollups, what of them is undelivered, and its first
		// and open days.
		{"FoldClosed", func() error { _, err := reconcile.FoldClosed(ctx, s, now, 70*24*time.Hour, 100); return err }},
		{"ReconcileWeek", func() error {
			_, err := reconcile.Run(ctx, s, now.Add(-7*24*time.Hour-time.Hour), time.Hour, now)
			return err
		}},
		{"PaymentsEnqueuedBefore", func() error {
			_, err := s.PaymentsEnqueuedBefore(ctx, []string{"payment:1512345600:T5980-1", "payment:none:x"}, now)
			return err
		}},
		// A pass as retention runs it: the oldest day's rows are due.
		{"Prune", func() error { _, err := s.Prune(ctx, now.Add(-59*24*time.Hour), 100); return err }},
		// Payloads of rows a month old, as retention.payloads prunes them.
		{"PrunePayloads", func() error { _, err := s.PrunePayloads(ctx, now.Add(-30*24*time.Hour), 100); return err }},
	}
	for _, c := range calls {
		rec.start()
		err := c.call()
		stmts := rec.take()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(stmts) == 0 {
			t.Fatalf("%s ran no statement", c.name)
		}
		for _, st := range stmts {
			if q := strings.ToLower(strings.TrimSpace(st.sql)); strings.HasPrefix(q, "begin") || q == "commit" ||
				q == "rollback" || strings.HasPrefix(q, "set local ") {
				continue // a transaction's bounds and settings: nothing to plan
			}
			scans, err := seqScans(ctx, s, st)
			if err != nil {
				t.Fatalf("%s: explain: %v\n%s", c.name, err, st.sql)
			}
			if len(scans) > 0 {
				t.Errorf("%s plans %s:\n%s", c.name, strings.Join(scans, ", "), st.sql)
			}
		}
	}
}

// seqScans returns what st's plan does that grows with history: a
// sequential scan of a history table, an EXISTS over one planned as a
// join, or a walk of a whole index of one for every row of a loop.
func seqScans(ctx context.Context, s *postgres.Store, st recorded) ([]string, error) {
	var plan []byte
	if err := s.Pool().QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.sql, st.args...).Scan(&plan); err != nil {
		return nil, err
	}
	var top []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &top); err != nil {
		return nil, err
	}
	var out []string
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.NodeType == "Seq Scan" && slices.Contains(history.Tables, n.Relation) {
			out = append(out, "a sequential scan of "+n.Relation)
		}
		// An EXISTS over a history table planned as a join: whether its
		// probe keeps its keys is then the statistics' choice, and at a
		// year of history (where the outbox's autoanalyze waits for a
		// tenth of its rows to change) the claim's lost them. The order
		// checks are scalar subqueries, always a keyed probe.
		if n.JoinType == "Anti" || n.JoinType == "Semi" {
			for _, c := range n.Plans {
				if slices.Contains(history.Tables, c.Relation) {
					out = append(out, fmt.Sprintf("%s join on %s", strings.ToLower(n.JoinType), c.Relation))
				}
			}
		}
		// The inner side of a nested loop walking an index of a history
		// table with no condition walks all of it for every outer row (an
		// EXISTS planned as a join whose probe lost its keys).
		if n.NodeType == "Nested Loop" && len(n.Plans) == 2 {
			if in := n.Plans[1]; strings.HasPrefix(in.NodeType, "Index") && in.IndexCond == "" &&
				slices.Contains(history.Tables, in.Relation) {
				out = append(out, fmt.Sprintf("a walk of all of %s (%s) for every row of a nested loop", in.Index, in.Relation))
			}
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	for _, p := range top {
		walk(p.Plan)
	}
	return out, nil
}

type planNode struct {
	NodeType  string     `json:"Node Type"`
	JoinType  string     `json:"Join Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Rows      float64    `json:"Actual Rows"`
	Loops     float64    `json:"Actual Loops"`
	Plans     []planNode `json:"Plans"`
}

// TestDeadRowsAreCountedNotRead: the counts of dead rows the gauges, the
// overview, /sinks and the dead-letter queue show are read from the count
// the outbox's triggers keep, so they cost the same with a year's dead
// rows as with none: run, Stats and CountDead read no more outbox rows
// than are still to deliver, and agree with the dead rows there are.
func TestDeadRowsAreCountedNotRead(t *testing.T) {
	rec := &recorder{}
	s := pgtest.New(t, postgres.Options{Tracer: rec})
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if err := history.Postgres(ctx, s.Pool(), 6000, 30, now, nil); err != nil {
		t.Fatal(err)
	}
	var live, dead, deadAcks int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE status IN ('pending', 'inflight')),
		count(*) FILTER (WHERE status = 'dead'), count(*) FILTER (WHERE status = 'dead' AND sink = 'acks')
		FROM outbox`).Scan(&live, &dead, &deadAcks); err != nil {
		t.Fatal(err)
	}
	if dead < 2*live || deadAcks == 0 {
		t.Fatalf("history of %d dead rows (%d at acks) and %d live: too few dead to tell", dead, deadAcks, live)
	}
	calls := []struct {
		name  string
		count func() (int, error)
		want  int
	}{
		{"Stats", func() (int, error) {
			st, err := s.Stats(ctx, now)
			n := 0
			for _, x := range st {
				n += x.Dead
			}
			return n, err
		}, dead},
		{"CountDead", func() (int, error) { return s.CountDead(ctx, outbox.DeadFilter{}) }, dead},
		{"CountDead acks", func() (int, error) { return s.CountDead(ctx, outbox.DeadFilter{Sink: "acks"}) }, deadAcks},
	}
	for _, c := range calls {
		rec.start()
		n, err := c.count()
		stmts := rec.take()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n != c.want {
			t.Errorf("%s: %d dead rows, want %d", c.name, n, c.want)
		}
		for _, st := range stmts {
			read, err := outboxRowsRead(ctx, s, st)
			if err != nil {
				t.Fatalf("%s: explain: %v\n%s", c.name, err, st.sql)
			}
			if read > live {
				t.Errorf("%s read %d outbox rows, more than the %d still to deliver:\n%s", c.name, read, live, st.sql)
			}
		}
	}
}

// outboxRowsRead runs st under EXPLAIN ANALYZE and returns how many rows
// its scans of outbox (of the table or of an index of it) returned.
func outboxRowsRead(ctx context.Context, s *postgres.Store, st recorded) (int, error) {
	var plan []byte
	if err := s.Pool().QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+st.sql, st.args...).Scan(&plan); err != nil {
		return 0, err
	}
	var top []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &top); err != nil {
		return 0, err
	}
	var n float64
	var walk func(p planNode)
	walk = func(p planNode) {
		if p.Relation == "outbox" {
			n += p.Rows * p.Loops
		}
		for _, c := range p.Plans {
			walk(c)
		}
	}
	for _, p := range top {
		walk(p.Plan)
	}
	return int(n), nil
}
