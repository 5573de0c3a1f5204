package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// setKeySQL and claimKeySQL are the lookups of SetKey and ClaimKey
// ($1 prefix, $2 the prefix's upper bound, $3 suffix; $1 ordering key).
const (
	setKeySQL = `SELECT key FROM inbox
		WHERE key ~>=~ $1 AND key ~<~ $2 AND status = 'processed'
		AND ($3 = '' OR (length(key) > length($1) + length($3) AND right(key, length($3)) = $3
			AND position(':' in substr(key, length($1) + 1, length(key) - length($1) - length($3))) = 0))
		ORDER BY created_at DESC LIMIT 1`
	claimKeySQL = `SELECT effect_key FROM outbox
		WHERE ordering_key = $1 AND kind = 'claim.received' ORDER BY id DESC LIMIT 1`
)

// SetKey implements inbox.AnswerLookup: a range of the inbox keys
// exchanged between the two parties, in byte order (~>=~ and ~<~, which
// the index inbox_key_pattern serves whatever the database's collation,
// and with a parameter, unlike LIKE in a generic plan), filtered by the
// suffix.
func (s *Store) SetKey(ctx context.Context, prefix, suffix string) (string, error) {
	var key string
	err := s.pool.QueryRow(ctx, setKeySQL, prefix, prefix+"\x7f", suffix).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
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
	err := s.pool.QueryRow(ctx, claimKeySQL, orderingKey).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("answered claim: %w", err)
	}
	return key, nil
}
