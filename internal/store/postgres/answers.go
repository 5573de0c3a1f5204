package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SetKey implements inbox.AnswerLookup: a LIKE on the inbox key, whose
// literal prefix the index inbox_key_pattern (text_pattern_ops, whatever
// the database's collation) turns into a range over the keys exchanged
// between the two parties.
func (s *Store) SetKey(ctx context.Context, prefix, suffix string) (string, error) {
	pattern := likeEscape(prefix) + "%" + likeEscape(suffix)
	var key string
	err := s.pool.QueryRow(ctx, `SELECT key FROM inbox
		WHERE key LIKE $1 AND status = 'processed'
		AND ($3::int = 0 OR position(':' in substr(key, $2::int + 1, length(key) - $2::int - $3::int)) = 0)
		ORDER BY created_at DESC LIMIT 1`, pattern, len(prefix), len(suffix)).Scan(&key)
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
	err := s.pool.QueryRow(ctx, `SELECT effect_key FROM outbox
		WHERE ordering_key = $1 AND kind = 'claim.received' ORDER BY id DESC LIMIT 1`, orderingKey).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("answered claim: %w", err)
	}
	return key, nil
}

// likeEscape escapes LIKE's wildcards and its default escape character.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
