package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
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

// historyTables are the tables that grow with history: no periodic or
// interactive statement may read one of them whole.
var historyTables = map[string]bool{"inbox": true, "outbox": true, "outbox_attempt": true, "remote_file": true,
	"sighting": true}

// buildHistory fills the store with days of files at perDay a day, as
// ediwatch writes them: ten 835 sets a file, each a payment.posted row,
// and one ack.999 row; 1% of the rows dead after 25 attempts, 3% of the
// files re-sent (duplicate sightings), the newest rows pending, the rest
// delivered with an attempt each; half the files post-processed.
func buildHistory(t *testing.T, s *postgres.Store, files, days int, now time.Time) {
	t.Helper()
	ctx := context.Background()
	step := time.Duration(days) * 24 * time.Hour / time.Duration(files)
	for _, q := range []string{
		// The ordering trigger's upsert of one row per ordering key is
		// quadratic within one statement: the load numbers the rows and
		// fills outbox_order itself.
		`ALTER TABLE outbox DISABLE TRIGGER outbox_order`,
		`INSERT INTO remote_file (source, path, size, mtime, sha256, status, sets, post_done, correlation_id,
			created_at, updated_at)
		 SELECT 'src' || (g % 3), '/in/f' || g || '.835', 40000, t, md5(g::text),
			CASE WHEN g % 997 = 0 THEN 'rejected' ELSE 'ingested' END, 10, g % 2 = 0, 'c' || g, t, t
		 FROM generate_series(1, $1) g, LATERAL (SELECT $3::timestamptz - ($1 - g) * $2::interval AS t) x`,
		`INSERT INTO inbox (key, status, content_hash, set_type, summary, source, path, file_sha256, correlation_id,
			created_at, updated_at)
		 SELECT 'x12:P:ZZ:PAYER' || (g % 20) || ':ZZ:US:' || g || ':P:US:' || g || ':835:' || n, 'processed',
			md5(g || ':' || n), '835', jsonb_build_object('payer_id', 'P' || (g % 20), 'trace_number',
			'T' || g || '-' || n, 'amount', '100.00', 'balanced', true), 'src' || (g % 3), '/in/f' || g || '.835',
			md5(g::text), 'c' || g, t, t
		 FROM generate_series(1, $1) g, generate_series(1, 10) n,
			LATERAL (SELECT $3::timestamptz - ($1 - g) * $2::interval AS t) x`,
		`INSERT INTO outbox (id, effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload_json, status,
			attempts, next_attempt_at, created_at, updated_at, delivered_at, last_error)
		 SELECT nextval(pg_get_serial_sequence('outbox', 'id')),
			CASE WHEN n <= 10 THEN 'payment:P' || (g % 20) || ':T' || g || '-' || n ELSE 'ack999:' || g END,
			CASE WHEN n <= 10 THEN 'payment.posted' ELSE 'ack.999' END, CASE WHEN n <= 10 THEN 'ledger' ELSE 'acks' END,
			'P' || (g % 20), 'k', 'c' || g,
			jsonb_build_object('payer_id', 'P' || (g % 20), 'amount', '100.00', 'pad', repeat('x', 400)),
			st, CASE st WHEN 'dead' THEN 25 WHEN 'pending' THEN 0 ELSE 1 END, t, t,
			CASE st WHEN 'pending' THEN t ELSE t + interval '2 seconds' END,
			CASE st WHEN 'delivered' THEN t + interval '2 seconds' END, CASE st WHEN 'dead' THEN 'HTTP 500' ELSE '' END
		 FROM generate_series(1, $1) g, generate_series(1, 11) n,
			LATERAL (SELECT $3::timestamptz - ($1 - g) * $2::interval AS t,
				CASE WHEN (g * 11 + n) % 100 = 0 THEN 'dead' WHEN g > $1 - 20 THEN 'pending' ELSE 'delivered' END AS st) x`,
		`INSERT INTO outbox_order (sink, ordering_key, touched_at)
		 SELECT sink, ordering_key, max(created_at) FROM outbox GROUP BY 1, 2`,
		`ALTER TABLE outbox ENABLE TRIGGER outbox_order`,
		`INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us, http_status, class, error, response_size,
			response)
		 SELECT id, a, a, updated_at, 4000, CASE status WHEN 'dead' THEN 500 ELSE 200 END, status, '', 0, ''
		 FROM outbox, LATERAL generate_series(1, CASE status WHEN 'dead' THEN 25 WHEN 'pending' THEN 0 ELSE 1 END) a
`,
		`INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id, original_correlation_id,
			created_at)
		 SELECT CASE WHEN g % 300 = 0 THEN 'conflict' ELSE 'duplicate' END, key, content_hash, source, path || '.again',
			file_sha256, correlation_id || 'r', correlation_id, created_at + interval '1 hour'
		 FROM inbox, LATERAL (SELECT substring(correlation_id from 2)::int AS g) x
		 WHERE g % 33 = 0 AND $1::int > 0 AND $2::interval IS NOT NULL AND $3::timestamptz IS NOT NULL`,
	} {
		args := []any{files, step, now}
		if !strings.Contains(q, "$1") {
			args = nil
		}
		if _, err := s.Pool().Exec(ctx, q, args...); err != nil {
			t.Fatalf("build history: %v\n%s", err, q)
		}
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
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
	buildHistory(t, s, 6000, 60, now)

	day := now.Add(-24 * time.Hour)
	calls := []struct {
		name string
		call func() error
	}{
		{"Stats", func() error { _, err := s.Stats(ctx, now); return err }},
		{"ReconcileFacts", func() error { _, err := s.ReconcileFacts(ctx, day, now.Add(-time.Hour)); return err }},
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
		{"FileOutcomes", func() error { _, err := s.FileOutcomes(ctx, []string{"c5990", "c5991"}); return err }},
		{"FileDetail", func() error { _, err := s.FileDetail(ctx, "c5990", 500); return err }},
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
		// A pass as retention runs it: the oldest day's rows are due.
		{"Prune", func() error { _, err := s.Prune(ctx, now.Add(-59*24*time.Hour), 100); return err }},
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
			scans, err := seqScans(ctx, s, st)
			if err != nil {
				t.Fatalf("%s: explain: %v\n%s", c.name, err, st.sql)
			}
			if len(scans) > 0 {
				t.Errorf("%s reads all of %s:\n%s", c.name, strings.Join(scans, ", "), st.sql)
			}
		}
	}
}

// seqScans returns the history tables st's plan reads with a sequential
// scan.
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
		if n.NodeType == "Seq Scan" && historyTables[n.Relation] {
			out = append(out, fmt.Sprintf("%s (seq scan)", n.Relation))
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
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Plans    []planNode `json:"Plans"`
}
