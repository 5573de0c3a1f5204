// Package history fills a fresh, migrated store with a history shaped like
// the one ediwatch writes, in bulk: per file ten 835 sets in the inbox,
// ten payment.posted rows and one ack.999 row in the outbox, a ledger row;
// 1% of the outbox rows dead after 25 attempts, 3% of the files re-sent
// (duplicate sightings, one in a hundred of them a key conflict), the
// newest rows pending, the rest delivered with one attempt each, half the
// files post-processed. Files are spread evenly over the days before now.
//
// The plan tests and bench/history build their stores with it.
package history

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// payloadDays is retention.payloads' default in days: rows delivered
// longer ago hold their residue alone and no attempts, as pruning
// leaves them.
const payloadDays = "30"

// Batch is how many files one statement writes.
const Batch = 50_000

// PostgresExec runs one statement (a pgxpool.Pool or pgx.Conn).
type PostgresExec interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Postgres writes files files over days days before now into db. The
// outbox's triggers are disabled while it loads (each upserts one row,
// of an ordering key or a sink's dead count, per outbox row: quadratic
// within a statement) and outbox_order and outbox_dead_count filled after.
func Postgres(ctx context.Context, db PostgresExec, files, days int, now time.Time, progress func(done int)) error {
	step := time.Duration(days) * 24 * time.Hour / time.Duration(files)
	run := func(q string, args ...any) error {
		if _, err := db.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("history: %w\n%s", err, q)
		}
		return nil
	}
	if err := run(`ALTER TABLE outbox DISABLE TRIGGER USER`); err != nil {
		return err
	}
	for lo := 1; lo <= files; lo += Batch {
		hi := min(files, lo+Batch-1)
		for _, q := range pgBatch {
			if err := run(q, files, step, now, lo, hi); err != nil {
				return err
			}
		}
		if progress != nil {
			progress(hi)
		}
	}
	for _, q := range []string{
		`INSERT INTO outbox_order (sink, ordering_key, touched_at)
		 SELECT sink, ordering_key, max(created_at) FROM outbox GROUP BY 1, 2
		 ON CONFLICT (sink, ordering_key) DO UPDATE SET touched_at = excluded.touched_at`,
		`DELETE FROM outbox_dead_count`,
		`INSERT INTO outbox_dead_count (sink, n) SELECT sink, count(*) FROM outbox WHERE status = 'dead' GROUP BY sink`,
		`ALTER TABLE outbox ENABLE TRIGGER USER`,
		`ANALYZE`,
	} {
		if err := run(q); err != nil {
			return err
		}
	}
	return nil
}

// pgFiles numbers a batch's files g ($4 to $5 of $1) with their time t.
const pgFiles = `generate_series($4::int, $5::int) g, LATERAL (SELECT $3::timestamptz - ($1::int - g) * $2::interval AS t) x`

var pgBatch = []string{
	`INSERT INTO remote_file (source, path, size, mtime, sha256, status, sets, post_done, correlation_id,
		created_at, updated_at)
	 SELECT 'src' || (g % 3), '/in/f' || g || '.835', 40000, t, (md5(g::text) || md5(g || 'h')),
		CASE WHEN g % 997 = 0 THEN 'rejected' ELSE 'ingested' END, 10, g % 2 = 0, 'c' || g, t, t
	 FROM ` + pgFiles,
	`INSERT INTO inbox (key, key_sans_isa13, status, content_hash, set_type, summary, source, path, file_sha256,
		correlation_id, created_at, updated_at)
	 SELECT 'x12:P:ZZ:PAYER' || (g % 20) || ':ZZ:US:' || g || ':P:US:' || g || ':835:' || n,
		'x12:P:ZZ:PAYER' || (g % 20) || ':ZZ:US::P:US:' || g || ':835:' || n, 'processed',
		(md5(g || ':' || n) || md5(g || ':h' || n)), '835', jsonb_build_object('payer_id', 'P' || (g % 20), 'trace_number',
		'T' || g || '-' || n, 'amount', '100.00', 'balanced', true), 'src' || (g % 3), '/in/f' || g || '.835',
		(md5(g::text) || md5(g || 'h')), 'c' || g, t, t
	 FROM ` + pgFiles + `, generate_series(1, 10) n`,
	`INSERT INTO outbox (id, effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload_json, status,
		attempts, next_attempt_at, created_at, updated_at, delivered_at, last_error, payload_pruned)
	 SELECT nextval(pg_get_serial_sequence('outbox', 'id')),
		CASE WHEN n <= 10 THEN 'payment:P' || (g % 20) || ':T' || g || '-' || n ELSE 'ack999:' || g END,
		CASE WHEN n <= 10 THEN 'payment.posted' ELSE 'ack.999' END, CASE WHEN n <= 10 THEN 'ledger' ELSE 'acks' END,
		'P' || (g % 20), 'k', 'c' || g,
		CASE WHEN pruned THEN jsonb_build_object('payer_id', 'P' || (g % 20), 'amount', '100.00', 'pruned', true)
			ELSE jsonb_build_object('payer_id', 'P' || (g % 20), 'amount', '100.00', 'pad', repeat('x', 400)) END,
		st, CASE st WHEN 'dead' THEN 25 WHEN 'pending' THEN 0 ELSE 1 END, t, t,
		CASE st WHEN 'pending' THEN t ELSE t + interval '2 seconds' END,
		CASE st WHEN 'delivered' THEN t + interval '2 seconds' END, CASE st WHEN 'dead' THEN 'HTTP 500' ELSE '' END,
		pruned
	 FROM ` + pgFiles + `, generate_series(1, 11) n,
		LATERAL (SELECT CASE WHEN (g * 11 + n) % 100 = 0 THEN 'dead' WHEN g > $1::int - 20 THEN 'pending'
			ELSE 'delivered' END AS st) s,
		LATERAL (SELECT st = 'delivered' AND t < $3::timestamptz - interval '` + payloadDays + ` days' AS pruned) p`,
	`INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us, http_status, class, error, response_size,
		response)
	 SELECT o.id, a, a, o.updated_at, 4000, CASE o.status WHEN 'dead' THEN 500 ELSE 200 END, o.status, '', 0, ''
	 FROM outbox o, LATERAL generate_series(1, CASE WHEN o.status = 'dead' THEN 25
		WHEN o.status = 'pending' OR o.payload_pruned THEN 0 ELSE 1 END) a
	 WHERE o.correlation_id = ANY(ARRAY(SELECT 'c' || g FROM generate_series($4::int, $5::int) g))
	   AND $1::int > 0 AND $2::interval IS NOT NULL AND $3::timestamptz IS NOT NULL`,
	`INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id, original_correlation_id,
		created_at)
	 SELECT CASE WHEN g % 300 = 0 THEN 'conflict' ELSE 'duplicate' END,
		'x12:P:ZZ:PAYER' || (g % 20) || ':ZZ:US:' || g || ':P:US:' || g || ':835:' || n, (md5(g || ':' || n) || md5(g || ':h' || n)),
		'src' || (g % 3), '/in/f' || g || '.835.again', (md5(g::text) || md5(g || 'h')), 'c' || g || 'r', 'c' || g, t + interval '1 hour'
	 FROM ` + pgFiles + `, generate_series(1, 10) n WHERE g % 33 = 0`,
}

// SQLite writes files files over days days before now into db, in one
// transaction per batch.
func SQLite(ctx context.Context, db *sql.DB, files, days int, now time.Time, progress func(done int)) error {
	step := int64(time.Duration(days) * 24 * time.Hour / time.Duration(files) / time.Microsecond)
	for lo := 1; lo <= files; lo += Batch {
		hi := min(files, lo+Batch-1)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		for _, q := range sqliteBatch {
			if _, err := tx.ExecContext(ctx, q, files, step, now.UnixMicro(), lo, hi); err != nil {
				tx.Rollback()
				return fmt.Errorf("history: %w\n%s", err, q)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if progress != nil {
			progress(hi)
		}
	}
	_, err := db.ExecContext(ctx, `ANALYZE`)
	return err
}

// sqliteFiles numbers a batch's files g (?4 to ?5 of ?1) with their time
// t, in microseconds as the store keeps times.
const sqliteFiles = `WITH RECURSIVE g(g) AS (SELECT ?4 UNION ALL SELECT g + 1 FROM g WHERE g < ?5),
	f AS (SELECT g, ?3 - (?1 - g) * ?2 AS t FROM g)`

var sqliteBatch = []string{
	sqliteFiles + ` INSERT INTO remote_file (source, path, size, mtime, sha256, status, sets, post_done,
		correlation_id, created_at, updated_at)
	 SELECT 'src' || (g % 3), '/in/f' || g || '.835', 40000, t, printf('%064x', g), CASE WHEN g % 997 = 0 THEN 'rejected'
		ELSE 'ingested' END, 10, g % 2 = 0, 'c' || g, t, t FROM f`,
	sqliteFiles + `, n(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM n WHERE n < 10)
	 INSERT INTO inbox (key, key_sans_isa13, status, content_hash, set_type, summary, source, path, file_sha256,
		correlation_id, created_at, updated_at)
	 SELECT 'x12:P:ZZ:PAYER' || (g % 20) || ':ZZ:US:' || g || ':P:US:' || g || ':835:' || n,
		'x12:P:ZZ:PAYER' || (g % 20) || ':ZZ:US::P:US:' || g || ':835:' || n, 'processed',
		printf('%064x', g * 100 + n), '835', json_object('payer_id', 'P' || (g % 20), 'trace_number', 'T' || g || '-' || n,
		'amount', '100.00', 'balanced', json('true')), 'src' || (g % 3), '/in/f' || g || '.835', printf('%064x', g),
		'c' || g, t, t FROM f, n`,
	sqliteFiles + `, n(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM n WHERE n < 11),
	 q AS (SELECT g, n, t, CASE WHEN (g * 11 + n) % 100 = 0 THEN 'dead' WHEN g > ?1 - 20 THEN 'pending'
		ELSE 'delivered' END AS st FROM f, n),
	 r AS (SELECT q.*, st = 'delivered' AND t < ?3 - ` + payloadDays + ` * 86400000000 AS pruned FROM q)
	 INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id, stored_payload, status,
		attempts, next_attempt_at, created_at, updated_at, delivered_at, last_error, payload_pruned)
	 SELECT CASE WHEN n <= 10 THEN 'payment:P' || (g % 20) || ':T' || g || '-' || n ELSE 'ack999:' || g END,
		CASE WHEN n <= 10 THEN 'payment.posted' ELSE 'ack.999' END, CASE WHEN n <= 10 THEN 'ledger' ELSE 'acks' END,
		'P' || (g % 20), 'k', 'c' || g,
		CASE WHEN pruned THEN json_object('payer_id', 'P' || (g % 20), 'amount', '100.00', 'pruned', json('true'))
			ELSE json_object('payer_id', 'P' || (g % 20), 'amount', '100.00', 'pad', printf('%.400c', 'x')) END,
		st, CASE st WHEN 'dead' THEN 25 WHEN 'pending' THEN 0 ELSE 1 END, t, t,
		CASE st WHEN 'pending' THEN t ELSE t + 2000000 END, CASE st WHEN 'delivered' THEN t + 2000000 END,
		CASE st WHEN 'dead' THEN 'HTTP 500' ELSE '' END, pruned FROM r`,
	// One attempt a delivered row, 25 a dead one: the rows this batch wrote
	// are the newest ids.
	sqliteFiles + `, a(a) AS (SELECT 1 UNION ALL SELECT a + 1 FROM a WHERE a < 25)
	 INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us, http_status, class, error, response_size,
		response)
	 SELECT o.id, a, a, o.updated_at, 4000, CASE o.status WHEN 'dead' THEN 500 ELSE 200 END, o.status, '', 0, ''
	 FROM outbox o, a WHERE o.id > (SELECT coalesce(max(outbox_id), 0) FROM outbox_attempt)
	   AND o.status <> 'pending' AND o.payload_pruned = 0 AND (a = 1 OR o.status = 'dead') AND ?1 > 0 AND ?2 IS NOT NULL
	   AND ?3 IS NOT NULL AND ?4 > 0 AND ?5 > 0 AND (SELECT count(*) FROM f) > 0`,
	sqliteFiles + `, n(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM n WHERE n < 10)
	 INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
		original_correlation_id, created_at)
	 SELECT CASE WHEN g % 300 = 0 THEN 'conflict' ELSE 'duplicate' END,
		'x12:P:ZZ:PAYER' || (g % 20) || ':ZZ:US:' || g || ':P:US:' || g || ':835:' || n, printf('%064x', g * 100 + n),
		'src' || (g % 3), '/in/f' || g || '.835.again', printf('%064x', g), 'c' || g || 'r', 'c' || g, t + 3600000000
	 FROM f, n WHERE g % 33 = 0`,
}

// Tables are the tables a history fills: those that grow with history,
// which no periodic or interactive statement may read whole.
var Tables = []string{"inbox", "outbox", "outbox_attempt", "remote_file", "sighting"}
