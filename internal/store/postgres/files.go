package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

var _ inbox.FileBrowser = (*Store)(nil)

const fileCols = `source, path, size, mtime, sha256, status, attempts, last_error, sets, correlation_id, created_at, updated_at`

func scanFile(row pgx.Row) (inbox.FileRow, error) {
	var f inbox.FileRow
	var status string
	if err := row.Scan(&f.Source, &f.Path, &f.Size, &f.MTime, &f.SHA256, &status, &f.Attempts, &f.LastError, &f.Sets,
		&f.CorrelationID, &f.CreatedAt, &f.UpdatedAt); err != nil {
		return f, err
	}
	f.Status = inbox.FileStatus(status)
	f.MTime, f.CreatedAt, f.UpdatedAt = f.MTime.UTC(), f.CreatedAt.UTC(), f.UpdatedAt.UTC()
	return f, nil
}

// ListFiles implements inbox.FileBrowser.
func (s *Store) ListFiles(ctx context.Context, f inbox.FileFilter, limit int) ([]inbox.FileRow, error) {
	where, args := "true", []any{limit}
	add := func(cond string, v any) {
		args = append(args, v)
		where += " AND " + strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args)))
	}
	if f.Source != "" {
		add("source = $?", f.Source)
	}
	if f.Status != "" {
		add("status = $?", string(f.Status))
	}
	if !f.Since.IsZero() {
		add("updated_at >= $?", f.Since)
	}
	if !f.Until.IsZero() {
		add("updated_at < $?", f.Until)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+fileCols+` FROM remote_file WHERE `+where+
		` ORDER BY updated_at DESC, source, path LIMIT $1`, args...)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.FileRow, error) { return scanFile(r) })
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	return out, nil
}

// FileDetail implements inbox.FileBrowser.
func (s *Store) FileDetail(ctx context.Context, correlationID string, limit int) (inbox.FileDetail, error) {
	var d inbox.FileDetail
	var err error
	d.File, err = scanFile(s.pool.QueryRow(ctx, `SELECT `+fileCols+` FROM remote_file WHERE correlation_id = $1
		ORDER BY updated_at DESC LIMIT 1`, correlationID))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, store.ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT key, status, set_type, reason, false, created_at FROM inbox WHERE correlation_id = $1
		UNION ALL SELECT key, kind, '', '', true, created_at FROM sighting WHERE correlation_id = $1
		ORDER BY 6, 1 LIMIT $2`, correlationID, limit)
	if err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	if d.Sets, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.FileSet, error) {
		var fs inbox.FileSet
		err := r.Scan(&fs.Key, &fs.Outcome, &fs.Type, &fs.Reason, &fs.Sighting, &fs.At)
		fs.At = fs.At.UTC()
		return fs, err
	}); err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT id, effect_key, kind, sink, status, attempts, last_status, last_error,
		created_at, updated_at FROM outbox WHERE correlation_id = $1 ORDER BY id LIMIT $2`, correlationID, limit)
	if err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	if d.Effects, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Row, error) {
		var o outbox.Row
		err := r.Scan(&o.ID, &o.EffectKey, &o.Kind, &o.Sink, &o.Status, &o.Attempts, &o.LastStatus, &o.LastError,
			&o.CreatedAt, &o.UpdatedAt)
		o.CorrelationID, o.CreatedAt, o.UpdatedAt = correlationID, o.CreatedAt.UTC(), o.UpdatedAt.UTC()
		return o, err
	}); err != nil {
		return d, fmt.Errorf("file detail: %w", err)
	}
	return d, nil
}
