package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

var _ inbox.FileBrowser = (*Store)(nil)

const fileCols = `source, path, size, mtime, sha256, status, attempts, last_error, sets, correlation_id, created_at, updated_at`

func scanFile(row scanner) (inbox.FileRow, error) {
	var f inbox.FileRow
	var mtime, created, updated int64
	var status string
	if err := row.Scan(&f.Source, &f.Path, &f.Size, &mtime, &f.SHA256, &status, &f.Attempts, &f.LastError, &f.Sets,
		&f.CorrelationID, &created, &updated); err != nil {
		return f, err
	}
	f.Status, f.MTime, f.CreatedAt, f.UpdatedAt = inbox.FileStatus(status), fromUS(mtime), fromUS(created), fromUS(updated)
	return f, nil
}

// ListFiles implements inbox.FileBrowser.
func (s *Store) ListFiles(ctx context.Context, f inbox.FileFilter, limit int) ([]inbox.FileRow, error) {
	where, args := "1 = 1", []any{}
	if f.Source != "" {
		where += " AND source = ?"
		args = append(args, f.Source)
	}
	if f.Status != "" {
		where += " AND status = ?"
		args = append(args, string(f.Status))
	}
	if !f.Since.IsZero() {
		where += " AND updated_at >= ?"
		args = append(args, us(f.Since))
	}
	if !f.Until.IsZero() {
		where += " AND updated_at < ?"
		args = append(args, us(f.Until))
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+fileCols+` FROM remote_file WHERE `+where+
		` ORDER BY updated_at DESC, source, path LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	out, err := store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (inbox.FileRow, error) { return scanFile(r) })
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	return out, nil
}

// FileDetail implements inbox.FileBrowser.
func (s *Store) FileDetail(ctx context.Context, correlationID string, limit int) (inbox.FileDetail, error) {
	var d inbox.FileDetail
	var err error
	d.File, err = scanFile(s.db.QueryRowContext(ctx, `SELECT `+fileCols+` FROM remote_file WHERE correlation_id = ?
		ORDER BY updated_at DESC LIMIT 1`, correlationID))
	if errors.Is(err, sql.ErrNoRows) {
		return d, store.ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT key, status, set_type, reason, 0, created_at FROM inbox WHERE correlation_id = ?
		UNION ALL SELECT key, kind, '', '', 1, created_at FROM sighting WHERE correlation_id = ?
		ORDER BY 6, 1 LIMIT ?`, correlationID, correlationID, limit)
	if err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	if d.Sets, err = store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (inbox.FileSet, error) {
		var fs inbox.FileSet
		var at int64
		err := r.Scan(&fs.Key, &fs.Outcome, &fs.Type, &fs.Reason, &fs.Sighting, &at)
		fs.At = fromUS(at)
		return fs, err
	}); err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	rows, err = s.db.QueryContext(ctx, `SELECT id, effect_key, kind, sink, status, attempts, last_status, last_error,
		created_at, updated_at FROM outbox WHERE correlation_id = ? ORDER BY id LIMIT ?`, correlationID, limit)
	if err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	if d.Effects, err = store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (outbox.Row, error) {
		var o outbox.Row
		var created, updated int64
		err := r.Scan(&o.ID, &o.EffectKey, &o.Kind, &o.Sink, &o.Status, &o.Attempts, &o.LastStatus, &o.LastError,
			&created, &updated)
		o.CorrelationID, o.CreatedAt, o.UpdatedAt = correlationID, fromUS(created), fromUS(updated)
		return o, err
	}); err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	return d, nil
}
