package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SetKey implements inbox.AnswerLookup: a range over the inbox's primary
// key (prefix to prefix + DEL; keys are printable ASCII), filtered by the
// suffix, so it reads the keys exchanged between the two parties only.
func (s *Store) SetKey(ctx context.Context, prefix, suffix string) (string, error) {
	var key string
	err := s.db.QueryRowContext(ctx, `SELECT key FROM inbox
		WHERE key >= ?1 AND key < ?2 AND status = 'processed'
		AND (?3 = '' OR (length(key) > length(?1) + length(?3) AND substr(key, -length(?3)) = ?3
			AND instr(substr(key, length(?1) + 1, length(key) - length(?1) - length(?3)), ':') = 0))
		ORDER BY created_at DESC LIMIT 1`, prefix, prefix+"\x7f", suffix).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("answered set: %w", err)
	}
	return key, nil
}

// ClaimKey implements inbox.AnswerLookup, by the index outbox_claim_order.
func (s *Store) ClaimKey(ctx context.Context, orderingKey string) (string, error) {
	var key string
	err := s.db.QueryRowContext(ctx, `SELECT effect_key FROM outbox
		WHERE ordering_key = ? AND kind = 'claim.received' ORDER BY id DESC LIMIT 1`, orderingKey).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("answered claim: %w", err)
	}
	return key, nil
}
