package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// keySansISA13 returns an inbox key with its seventh part (the ISA13)
// taken out, "x12:P:ZZ:A:ZZ:B::A:B:1:837:0001" for
// "x12:P:ZZ:A:ZZ:B:000000001:A:B:1:837:0001", as the column
// key_sans_isa13 holds it (migration 0011; index inbox_key_sans_isa13); nil
// for a key of fewer than seven parts, which no lookup asks for.
func keySansISA13(key string) any {
	sixth, seventh := -1, -1
	n := 0
	for i := 0; i < len(key); i++ {
		if key[i] != ':' {
			continue
		}
		n++
		if n == 6 {
			sixth = i
		}
		if n == 7 {
			seventh = i
			break
		}
	}
	if seventh < 0 {
		return nil
	}
	return key[:sixth+1] + key[seventh:]
}

// setKeyQuery returns the query of SetKey and its arguments: one equality
// on key_sans_isa13 when prefix is the six key parts a 999's lookup gives,
// else a range of the primary key.
func setKeyQuery(prefix, suffix string) (string, []any) {
	if suffix != "" && strings.Count(prefix, ":") == 6 && strings.HasSuffix(prefix, ":") && strings.HasPrefix(suffix, ":") {
		return `SELECT key FROM inbox WHERE key_sans_isa13 = ?1 || ?2 AND status = 'processed'
			AND length(key) > length(?1) + length(?2) ORDER BY created_at DESC LIMIT 1`, []any{prefix, suffix}
	}
	return `SELECT key FROM inbox
		WHERE key >= ?1 AND key < ?2 AND status = 'processed'
		AND (?3 = '' OR (length(key) > length(?1) + length(?3) AND substr(key, -length(?3)) = ?3
			AND instr(substr(key, length(?1) + 1, length(key) - length(?1) - length(?3)), ':') = 0))
		ORDER BY created_at DESC LIMIT 1`, []any{prefix, prefix + "\x7f", suffix}
}

// SetKey implements inbox.AnswerLookup: a 999's lookup (a prefix of six
// key parts and a suffix) is one equality on the key less its ISA13
// (index inbox_key_sans_isa13); any other (a TA1's: the sets of one
// interchange) a range over the inbox's primary key (prefix to prefix +
// DEL; keys are printable ASCII), filtered by the suffix.
func (s *Store) SetKey(ctx context.Context, prefix, suffix string) (string, error) {
	var key string
	q, args := setKeyQuery(prefix, suffix)
	err := s.side.QueryRowContext(ctx, q, args...).Scan(&key)
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
	// A row migration 0014 left under its "@SINK:" key (a second row of
	// the claim at its sink) names the claim by its key all the same.
	err := s.side.QueryRowContext(ctx, `SELECT CASE WHEN substr(effect_key, 1, length(sink) + 2) = '@' || sink || ':'
		THEN substr(effect_key, length(sink) + 3) ELSE effect_key END FROM outbox
		WHERE ordering_key = ? AND kind = 'claim.received' ORDER BY id DESC LIMIT 1`, orderingKey).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("answered claim: %w", err)
	}
	return key, nil
}
