// Package history fills a fresh, migrated store with a history shaped like
// the one ediwatch writes, in bulk: per file ten 835 sets in the inbox,
// ten payment.posted rows and one ack.999 row in the outbox, a ledger row;
// 1% of the outbox rows dead after 25 attempts, 3% of the files re-sent
// (duplicate sightings, one in a hundred of them a key conflict), the
// newest rows pending, the rest delivered with one attempt each, half the
// files post-processed. Files are spread evenly over the days before now.
//
// Each row is shaped as ediwatch writes it: keys, effect keys, ordering
// keys, correlation ids, hashes and paths of the same lengths, and the
// payloads, residues and summaries that internal/process makes of a
// remittance of eight claims a set (Template). TestRowsMatchIngest holds
// the rows' widths to those a real ingest writes.
//
// The plan tests and bench/history build their stores with it.
package history

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// CorrelationID is the correlation id of the history's file g (1 to
// files, oldest first): twenty characters, as store.NewCorrelationID's.
func CorrelationID(g int) string { return fmt.Sprintf("c%019d", g) }

// Template is what ediwatch stores of one set and one file of the
// history, made by the real pipeline: internal/process reading an
// internal/x12gen remittance of eight claims a set.
type Template struct {
	// Summary is a set's inbox summary (JSON).
	Summary []byte
	// Payment is a payment.posted row's payload as stored (packed), and
	// Residue what retention.payloads leaves of it.
	Payment, Residue []byte
	// Ack is an ack.999 row's payload as stored.
	Ack []byte
}

// MakeTemplate returns the Template, made once.
var MakeTemplate = sync.OnceValues(func() (Template, error) {
	var t Template
	var b bytes.Buffer
	r := x12gen.Remit{SetsPerGroup: 1, ClaimsPerSet: 8, LinesPerClaim: 1, Trace: "T", EOL: "\n"}
	if _, err := r.Write(&b); err != nil {
		return t, err
	}
	cfg := process.Config{ControlNumbers: &ack.MemoryControlNumbers{}}
	_, err := process.File(context.Background(), bytes.NewReader(b.Bytes()), cfg, func(it process.Item) error {
		if it.Set != nil && len(it.Set.Effects) > 0 {
			t.Summary, _ = it.Set.AppendSummaryJSON(nil)
			t.Payment = outbox.PackPayload(it.Set.Effects[0].Payload)
			t.Residue = outbox.PayloadResidue(t.Payment)
		}
		if it.Ack != nil && it.Ack.Kind == process.KindAck999 {
			t.Ack = outbox.PackPayload(it.Ack.Payload)
		}
		return nil
	})
	if err == nil && (t.Summary == nil || t.Payment == nil || t.Ack == nil) {
		err = errors.New("the remittance made no payment or no 999")
	}
	if err != nil {
		return t, fmt.Errorf("history: template: %w", err)
	}
	return t, nil
})

// payloadDays is retention.payloads' default in days: rows delivered
// longer ago hold their residue alone, no attempts and neither inbox key
// nor (a payment's) ordering key, as pruning leaves them.
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
	t, err := MakeTemplate()
	if err != nil {
		return err
	}
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
	extra := map[string][]any{pgInbox: {t.Summary}, pgOutbox: {t.Payment, t.Residue, t.Ack, outbox.PayloadResidue(t.Ack)}}
	for lo := 1; lo <= files; lo += Batch {
		hi := min(files, lo+Batch-1)
		for _, q := range []string{pgRemoteFile, pgInbox, pgOutbox, pgAttempt, pgSighting} {
			if err := run(q, append([]any{files, step, now, lo, hi}, extra[q]...)...); err != nil {
				return err
			}
		}
		if progress != nil {
			progress(hi)
		}
	}
	for _, q := range []string{
		// The ordering locks of the keys inserted within retention.payloads
		// (PrunePayloads deletes older ones).
		`INSERT INTO outbox_order (sink, ordering_key, touched_at)
		 SELECT sink, ordering_key, max(created_at) FROM outbox
		 WHERE created_at >= (SELECT max(created_at) FROM outbox) - interval '` + payloadDays + ` days' GROUP BY 1, 2
		 ON CONFLICT (sink, ordering_key) DO UPDATE SET touched_at = excluded.touched_at`,
		// The effect-key locks of the payments, as the claim functions take
		// them, within retention.payloads too.
		`INSERT INTO outbox_effect_lock (effect_key, touched_at)
		 SELECT effect_key, max(created_at) FROM outbox
		 WHERE kind = 'payment.posted'
		   AND created_at >= (SELECT max(created_at) FROM outbox) - interval '` + payloadDays + ` days' GROUP BY 1
		 ON CONFLICT (effect_key) DO UPDATE SET touched_at = excluded.touched_at`,
		`DELETE FROM outbox_dead_count`,
		`INSERT INTO outbox_dead_count (sink, n) SELECT sink, count(*) FROM outbox WHERE status = 'dead' GROUP BY sink`,
		`ALTER TABLE outbox ENABLE TRIGGER USER`,
		// These tables only: a bare ANALYZE reads every schema of the
		// database (other tests' stores, other histories).
		`ANALYZE inbox, outbox, outbox_attempt, remote_file, sighting, outbox_order, outbox_effect_lock,
			outbox_dead_count`,
	} {
		if err := run(q); err != nil {
			return err
		}
	}
	return nil
}

// The values of a file g, shaped as ediwatch writes them: its time t,
// its payer p (one of twenty, the sender of its interchange), its
// correlation id, path and SHA-256; a set n's key and content hash.
const (
	pgFiles = `generate_series($4::int, $5::int) g,
		LATERAL (SELECT $3::timestamptz - ($1::int - g) * $2::interval AS t, lpad((g % 20)::text, 2, '0') AS p,
			'c' || lpad(g::text, 19, '0') AS corr, '/outbound/835/ERA_' || lpad(g::text, 9, '0') || '.835' AS path,
			md5(g::text) || md5(g || 'h') AS sha) x`
	// pgKey is set n's key; pgKeySansISA13 the same less its ISA13.
	pgKey          = `'x12:P:ZZ:PAYER' || p || ':ZZ:RIVERSIDE:' || lpad(g::text, 9, '0') || ':PAYER' || p || ':RIVERSIDE:' || g || ':835:' || lpad(n::text, 4, '0')`
	pgKeySansISA13 = `'x12:P:ZZ:PAYER' || p || ':ZZ:RIVERSIDE::PAYER' || p || ':RIVERSIDE:' || g || ':835:' || lpad(n::text, 4, '0')`
	pgContentHash  = `md5(g || ':' || n) || md5(g || ':h' || n)`
)

var (
	pgRemoteFile = `INSERT INTO remote_file (source, path, size, mtime, sha256, status, sets, post_done, correlation_id,
		created_at, updated_at)
	 SELECT 'src' || (g % 3), path, 40000, t, sha, CASE WHEN g % 997 = 0 THEN 'rejected' ELSE 'ingested' END, 10,
		g % 2 = 0, corr, t, t
	 FROM ` + pgFiles
	pgInbox = `INSERT INTO inbox (key, key_sans_isa13, status, content_hash, set_type, summary, source, path, file_sha256,
		correlation_id, created_at, updated_at, clean)
	 SELECT ` + pgKey + `, ` + pgKeySansISA13 + `, 'processed', ` + pgContentHash + `, '835',
		jsonb_set(jsonb_set($6::jsonb, '{payer_id}', to_jsonb('15123456' || p)), '{trace_number}', to_jsonb('T' || g || '-' || n)),
		'src' || (g % 3), path, sha, corr, t, t, true
	 FROM ` + pgFiles + `, generate_series(1, 10) n`
	// Ten payment.posted rows and an ack.999 row a file ($6 and $7 a
	// payment's payload and residue, $8 and $9 a 999's).
	pgOutbox = `INSERT INTO outbox (id, effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload_packed,
		status, attempts, next_attempt_at, created_at, updated_at, delivered_at, last_error, last_status, payload_pruned,
		effect_hash)
	 SELECT nextval(pg_get_serial_sequence('outbox', 'id')), ek, CASE WHEN n <= 10 THEN 'payment.posted' ELSE 'ack.999' END,
		CASE WHEN n <= 10 THEN 'ledger' ELSE 'acks' END,
		CASE WHEN n > 10 THEN 'acks:ZZ:PAYER' || p WHEN NOT pruned THEN ek ELSE '' END,
		CASE WHEN n <= 10 AND NOT pruned THEN ` + pgKey + ` ELSE '' END, corr,
		CASE WHEN n <= 10 THEN CASE WHEN pruned THEN $7::bytea ELSE $6::bytea END
			ELSE CASE WHEN pruned THEN $9::bytea ELSE $8::bytea END END,
		st, CASE st WHEN 'dead' THEN 25 WHEN 'pending' THEN 0 ELSE 1 END, t, t,
		CASE st WHEN 'pending' THEN t ELSE t + interval '2 seconds' END,
		CASE st WHEN 'delivered' THEN t + interval '2 seconds' END, CASE st WHEN 'dead' THEN 'HTTP 500' ELSE '' END,
		CASE st WHEN 'dead' THEN 500 WHEN 'delivered' THEN 200 ELSE 0 END, pruned, md5(ek) || md5(ek || 'h')
	 FROM ` + pgFiles + `, generate_series(1, 11) n,
		LATERAL (SELECT CASE WHEN (g * 11 + n) % 100 = 0 THEN 'dead' WHEN g > $1::int - 20 THEN 'pending'
			ELSE 'delivered' END AS st,
			CASE WHEN n <= 10 THEN 'payment:15123456' || p || ':T' || g || '-' || n
				ELSE 'ack999:x12:P:ZZ:PAYER' || p || ':ZZ:RIVERSIDE:' || lpad(g::text, 9, '0') || ':PAYER' || p ||
					':RIVERSIDE:' || g || ':' || left(md5(g::text), 16) END AS ek) s,
		LATERAL (SELECT st = 'delivered' AND t < $3::timestamptz - interval '` + payloadDays + ` days' AS pruned) q`
	// pgAttempt writes the attempts of the batch's outbox rows: those
	// after every row with attempts so far (ids grow batch by batch), a
	// range of the primary key; a list of the batch's correlation ids
	// was planned, at some sizes, as a scan of the whole outbox.
	pgAttempt = `INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us, http_status, class, error, response_size,
		response)
	 SELECT o.id, a, a, o.updated_at, 4000, CASE o.status WHEN 'dead' THEN 500 ELSE 200 END, o.status, '', 0, ''
	 FROM outbox o, LATERAL generate_series(1, CASE WHEN o.status = 'dead' THEN 25
		WHEN o.status = 'pending' OR o.payload_pruned THEN 0 ELSE 1 END) a
	 WHERE o.id > (SELECT coalesce(max(outbox_id), 0) FROM outbox_attempt)
	   AND $1::int > 0 AND $2::interval IS NOT NULL AND $3::timestamptz IS NOT NULL AND $4::int <= $5::int`
	pgSighting = `INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
		original_correlation_id, created_at)
	 SELECT CASE WHEN g % 300 = 0 THEN 'conflict' ELSE 'duplicate' END, ` + pgKey + `, ` + pgContentHash + `,
		'src' || (g % 3), path || '.again', sha, 'r' || lpad(g::text, 19, '0'), corr, t + interval '1 hour'
	 FROM ` + pgFiles + `, generate_series(1, 10) n WHERE g % 33 = 0`
)

// SQLite writes files files over days days before now into db, in one
// transaction per batch.
func SQLite(ctx context.Context, db *sql.DB, files, days int, now time.Time, progress func(done int)) error {
	t, err := MakeTemplate()
	if err != nil {
		return err
	}
	step := int64(time.Duration(days) * 24 * time.Hour / time.Duration(files) / time.Microsecond)
	extra := map[string][]any{sqliteInbox: {string(t.Summary)},
		sqliteOutbox: {t.Payment, t.Residue, t.Ack, outbox.PayloadResidue(t.Ack)}}
	for lo := 1; lo <= files; lo += Batch {
		hi := min(files, lo+Batch-1)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		for _, q := range []string{sqliteRemoteFile, sqliteInbox, sqliteOutbox, sqliteAttempt, sqliteSighting} {
			args := append([]any{files, step, now.UnixMicro(), lo, hi}, extra[q]...)
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
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
	_, err = db.ExecContext(ctx, `ANALYZE`)
	return err
}

// sqliteFiles numbers a batch's files g (?4 to ?5 of ?1) with their time
// t, in microseconds as the store keeps times, and the values of pgFiles.
const (
	sqliteFiles = `WITH RECURSIVE g(g) AS (SELECT ?4 UNION ALL SELECT g + 1 FROM g WHERE g < ?5),
	f AS (SELECT g, ?3 - (?1 - g) * ?2 AS t, printf('%02d', g % 20) AS p, printf('c%019d', g) AS corr,
		printf('/outbound/835/ERA_%09d.835', g) AS path, printf('%064x', g) AS sha FROM g),
	n(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM n WHERE n < 11)`
	sqliteKey          = `'x12:P:ZZ:PAYER' || p || ':ZZ:RIVERSIDE:' || printf('%09d', g) || ':PAYER' || p || ':RIVERSIDE:' || g || ':835:' || printf('%04d', n)`
	sqliteKeySansISA13 = `'x12:P:ZZ:PAYER' || p || ':ZZ:RIVERSIDE::PAYER' || p || ':RIVERSIDE:' || g || ':835:' || printf('%04d', n)`
	sqliteContentHash  = `printf('%064x', g * 100 + n)`
)

var (
	sqliteRemoteFile = sqliteFiles + ` INSERT INTO remote_file (source, path, size, mtime, sha256, status, sets, post_done,
		correlation_id, created_at, updated_at)
	 SELECT 'src' || (g % 3), path, 40000, t, sha, CASE WHEN g % 997 = 0 THEN 'rejected' ELSE 'ingested' END, 10,
		g % 2 = 0, corr, t, t FROM f`
	sqliteInbox = sqliteFiles + ` INSERT INTO inbox (key, key_sans_isa13, status, content_hash, set_type, summary, source,
		path, file_sha256, correlation_id, created_at, updated_at, clean)
	 SELECT ` + sqliteKey + `, ` + sqliteKeySansISA13 + `, 'processed', ` + sqliteContentHash + `, '835',
		json_set(?6, '$.payer_id', '15123456' || p, '$.trace_number', 'T' || g || '-' || n), 'src' || (g % 3), path, sha,
		corr, t, t, 1 FROM f, n WHERE n <= 10`
	sqliteOutbox = sqliteFiles + `,
	 q AS (SELECT f.*, n, CASE WHEN (g * 11 + n) % 100 = 0 THEN 'dead' WHEN g > ?1 - 20 THEN 'pending'
		ELSE 'delivered' END AS st,
		CASE WHEN n <= 10 THEN 'payment:15123456' || p || ':T' || g || '-' || n
			ELSE 'ack999:x12:P:ZZ:PAYER' || p || ':ZZ:RIVERSIDE:' || printf('%09d', g) || ':PAYER' || p || ':RIVERSIDE:' ||
				g || ':' || printf('%016x', g) END AS ek FROM f, n),
	 r AS (SELECT q.*, st = 'delivered' AND t < ?3 - ` + payloadDays + ` * 86400000000 AS pruned FROM q)
	 INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id, stored_payload, status,
		attempts, next_attempt_at, created_at, updated_at, delivered_at, last_error, last_status, payload_pruned,
		effect_hash)
	 SELECT ek, CASE WHEN n <= 10 THEN 'payment.posted' ELSE 'ack.999' END, CASE WHEN n <= 10 THEN 'ledger' ELSE 'acks' END,
		CASE WHEN n > 10 THEN 'acks:ZZ:PAYER' || p WHEN NOT pruned THEN ek ELSE '' END,
		CASE WHEN n <= 10 AND NOT pruned THEN ` + sqliteKey + ` ELSE '' END, corr,
		CASE WHEN n <= 10 THEN CASE WHEN pruned THEN ?7 ELSE ?6 END ELSE CASE WHEN pruned THEN ?9 ELSE ?8 END END,
		st, CASE st WHEN 'dead' THEN 25 WHEN 'pending' THEN 0 ELSE 1 END, t, t,
		CASE st WHEN 'pending' THEN t ELSE t + 2000000 END, CASE st WHEN 'delivered' THEN t + 2000000 END,
		CASE st WHEN 'dead' THEN 'HTTP 500' ELSE '' END, CASE st WHEN 'dead' THEN 500 WHEN 'delivered' THEN 200 ELSE 0 END,
		pruned, printf('%064x', g * 100 + n + 7) FROM r`
	// One attempt a delivered row, 25 a dead one: the rows this batch
	// wrote are the newest ids.
	sqliteAttempt = sqliteFiles + `, a(a) AS (SELECT 1 UNION ALL SELECT a + 1 FROM a WHERE a < 25)
	 INSERT INTO outbox_attempt (outbox_id, seq, attempt, at, latency_us, http_status, class, error, response_size,
		response)
	 SELECT o.id, a, a, o.updated_at, 4000, CASE o.status WHEN 'dead' THEN 500 ELSE 200 END, o.status, '', 0, ''
	 FROM outbox o, a WHERE o.id > (SELECT coalesce(max(outbox_id), 0) FROM outbox_attempt)
	   AND o.status <> 'pending' AND o.payload_pruned = 0 AND (a = 1 OR o.status = 'dead') AND ?1 > 0 AND ?2 IS NOT NULL
	   AND ?3 IS NOT NULL AND ?4 > 0 AND ?5 > 0 AND (SELECT count(*) FROM f) > 0 AND (SELECT count(*) FROM n) > 0`
	sqliteSighting = sqliteFiles + ` INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256,
		correlation_id, original_correlation_id, created_at)
	 SELECT CASE WHEN g % 300 = 0 THEN 'conflict' ELSE 'duplicate' END, ` + sqliteKey + `, ` + sqliteContentHash + `,
		'src' || (g % 3), path || '.again', sha, printf('r%019d', g), corr, t + 3600000000
	 FROM f, n WHERE n <= 10 AND g % 33 = 0`
)

// Tables are the tables a history fills: those that grow with history,
// which no periodic or interactive statement may read whole.
var Tables = []string{"inbox", "outbox", "outbox_attempt", "remote_file", "sighting"}
