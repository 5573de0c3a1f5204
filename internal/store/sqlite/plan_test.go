package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store/history"
)

// recordingDriver is modernc's driver with every statement prepared or
// run through a connection kept while on.
type recordingDriver struct {
	base  msqlite.Driver
	mu    sync.Mutex
	on    bool
	stmts []recordedStmt
}

type recordedStmt struct {
	query string
	args  []any
}

func (d *recordingDriver) record(query string, args []driver.NamedValue) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.on {
		return
	}
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a.Value
	}
	d.stmts = append(d.stmts, recordedStmt{query, vals})
}

func (d *recordingDriver) start() {
	d.mu.Lock()
	d.on = true
	d.mu.Unlock()
}

func (d *recordingDriver) take() []recordedStmt {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.stmts
	d.stmts, d.on = nil, false
	return out
}

func (d *recordingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.base.Open(name)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, d: d}, nil
}

// recordingConn forwards to modernc's connection, which implements the
// context interfaces database/sql prefers.
type recordingConn struct {
	driver.Conn
	d *recordingDriver
}

func (c *recordingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.d.record(q, args)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *recordingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.d.record(q, args)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *recordingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.d.record(q, nil)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c *recordingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

// planDriver is registered once, as "sqlite-recording".
var (
	planDriver         = &recordingDriver{}
	registerPlanDriver sync.Once
)

// TestNoPeriodicOrInteractiveStatementReadsAllHistory: every statement
// the gauges, the console, the CLI, the relay and pruning run is planned
// (EXPLAIN QUERY PLAN) on a store holding two months of history without a
// full scan of a table that grows with history, nor of an index of all
// its rows: only searches, and scans of partial indexes of live rows.
func TestNoPeriodicOrInteractiveStatementReadsAllHistory(t *testing.T) {
	registerPlanDriver.Do(func() { sql.Register("sqlite-recording", planDriver) })
	rec := planDriver
	s, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "plan.db"), Options{DriverName: "sqlite-recording"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if err := history.SQLite(ctx, s.db, 6000, 60, now, nil); err != nil {
		t.Fatal(err)
	}
	partial := map[string]bool{}
	rows, err := s.db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND sql LIKE '%WHERE%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		partial[n] = true
	}
	rows.Close()

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
			if isControl(st.query) {
				continue
			}
			scans, err := fullScans(s.db, st, partial)
			if err != nil {
				t.Fatalf("%s: explain: %v\n%s", c.name, err, st.query)
			}
			if len(scans) > 0 {
				t.Errorf("%s reads all of %s:\n%s", c.name, strings.Join(scans, ", "), st.query)
			}
		}
	}
}

// isControl tells transaction control and pragmas, which read no table.
func isControl(q string) bool {
	q = strings.ToUpper(strings.TrimSpace(q))
	for _, p := range []string{"BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "SAVEPOINT", "RELEASE"} {
		if strings.HasPrefix(q, p) {
			return true
		}
	}
	return false
}

// scanRE matches a plan step that scans a table: "SCAN outbox", "SCAN o
// USING COVERING INDEX x" (an alias stands for its table).
var scanRE = regexp.MustCompile(`^SCAN (\w+)(?: AS (\w+))?(?: USING (?:COVERING )?INDEX (\w+))?`)

// aliasRE finds a history table named with an alias ("outbox o", "outbox AS o").
var aliasRE = regexp.MustCompile(`\b(inbox|outbox|outbox_attempt|remote_file|sighting)\s+(?:AS\s+)?([A-Za-z_]\w*)`)

var keywords = map[string]bool{"WHERE": true, "JOIN": true, "ON": true, "SET": true, "INDEXED": true, "GROUP": true,
	"ORDER": true, "LIMIT": true, "USING": true, "LEFT": true, "INNER": true, "UNION": true, "VALUES": true,
	"AS": true, "AND": true, "OR": true, "SELECT": true, "RETURNING": true, "NOT": true, "DEFAULT": true}

// fullScans returns the history tables st's plan reads whole: a scan of
// the table or of an index that is not partial.
func fullScans(db *sql.DB, st recordedStmt, partial map[string]bool) ([]string, error) {
	rows, err := db.Query("EXPLAIN QUERY PLAN "+st.query, st.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	aliases := map[string]string{}
	for _, m := range aliasRE.FindAllStringSubmatch(st.query, -1) {
		if !keywords[strings.ToUpper(m[2])] {
			aliases[m[2]] = m[1]
		}
	}
	var details []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		details = append(details, detail)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// A scan of an index in the order a LIMIT asks for stops at the
	// limit, unless SQLite must sort what it read first.
	ordered := strings.Contains(st.query, "LIMIT") && !strings.Contains(strings.Join(details, "\n"), "FOR ORDER BY")
	var out []string
	for _, detail := range details {
		m := scanRE.FindStringSubmatch(detail)
		if m == nil {
			continue
		}
		table := m[1]
		if t, ok := aliases[table]; ok {
			table = t
		}
		if !slices.Contains(history.Tables, table) {
			continue
		}
		if m[3] != "" && (partial[m[3]] || ordered) {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s)", table, detail))
	}
	return out, nil
}

var ledgerRead = regexp.MustCompile(`^(SEARCH|SCAN) (r|remote_file)\b`)

// TestLastFileTimesProbesTheIndexBySource: every read of the ledger the
// silence alarm makes is a probe of remote_file_source_recorded (one per
// source), never a search by status, which reads every recorded file.
func TestLastFileTimesProbesTheIndexBySource(t *testing.T) {
	s, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "plan.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if err := history.SQLite(ctx, s.db, 3000, 10, now, nil); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+lastFileTimesSQL)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	reads := 0
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		if !ledgerRead.MatchString(detail) { // the statement names each read of the ledger r
			continue
		}
		reads++
		if !strings.Contains(detail, "INDEX remote_file_source_recorded") || !strings.Contains(detail, "source") {
			t.Errorf("the ledger read by %q", detail)
		}
	}
	if reads != 3 {
		t.Errorf("%d reads of the ledger, want the three probes", reads)
	}
	got, err := s.LastFileTimes(ctx)
	if err != nil || len(got) != 3 {
		t.Errorf("last file times: %v %v, want three sources", got, err)
	}
}
