package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	// setKeyByEnvelopeSQL is SetKey for a prefix of six key parts (an
	// envelope up to ISA08) and a suffix: the key less its seventh part
	// (the ISA13) is prefix || suffix, which the index
	// inbox_key_sans_isa13 (migration 0011) finds by equality on the
	// column, and inbox_key_sans_isa13_before on the expression for rows
	// stored before that column ($1 prefix, $2 suffix).
	setKeyByEnvelopeSQL = `SELECT key FROM (
		(SELECT key, created_at FROM inbox WHERE key_sans_isa13 = $1 || $2
			AND status = 'processed' AND length(key) > length($1) + length($2)
			ORDER BY created_at DESC LIMIT 1)
		UNION ALL
		(SELECT key, created_at FROM inbox
			WHERE key_sans_isa13 IS NULL AND regexp_replace(key, '^((?:[^:]*:){6})[^:]*', '\1') = $1 || $2
			AND status = 'processed' AND length(key) > length($1) + length($2)
			ORDER BY created_at DESC LIMIT 1)) k
		ORDER BY created_at DESC LIMIT 1`
	// A row migration 0014 left under its "@SINK:" key (a second row of
	// the claim at its sink) names the claim by its key all the same.
	claimKeySQL = `SELECT CASE WHEN left(effect_key, length(sink) + 2) = '@' || sink || ':'
		THEN substr(effect_key, length(sink) + 3) ELSE effect_key END FROM outbox
		WHERE ordering_key = $1 AND kind = 'claim.received' ORDER BY id DESC LIMIT 1`
)

// SetKey implements inbox.AnswerLookup. A 999's lookup (a prefix of six
// key parts and a suffix) is one equality on the key less its ISA13
// (index inbox_key_sans_isa13); any other (a TA1's: the sets of one
// interchange) is a range of the inbox keys in byte order (~>=~ and ~<~,
// which the inbox key's unique text_pattern_ops index serves (migration
// 0021; inbox_key_pattern before it) whatever the database's
// collation, and with a parameter, unlike LIKE in a generic plan),
// filtered by the suffix.
func (s *Store) SetKey(ctx context.Context, prefix, suffix string) (string, error) {
	var key string
	q, args := setKeyQuery(prefix, suffix)
	err := s.side.QueryRow(ctx, q, args...).Scan(&key) // see Store.side
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("answered set: %w", err)
	}
	return key, nil
}

// setKeyQuery returns the query of SetKey and its arguments: by the
// envelope less its ISA13 (one index equality) when prefix is the six
// key parts a 999's lookup gives, else by the range of prefix.
func setKeyQuery(prefix, suffix string) (string, []any) {
	if suffix != "" && strings.Count(prefix, ":") == 6 && strings.HasSuffix(prefix, ":") && strings.HasPrefix(suffix, ":") {
		return setKeyByEnvelopeSQL, []any{prefix, suffix}
	}
	return setKeySQL, []any{prefix, prefix + "\x7f", suffix}
}

// ClaimKey implements inbox.AnswerLookup, by the index outbox_claim_order.
func (s *Store) ClaimKey(ctx context.Context, orderingKey string) (string, error) {
	var key string
	err := s.side.QueryRow(ctx, claimKeySQL, orderingKey).Scan(&key) // see Store.side
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("answered claim: %w", err)
	}
	return key, nil
}

// keySansISA13 returns key with its seventh part (the ISA13) taken out,
// "x12:P:ZZ:A:ZZ:B::A:B:1:837:0001" for
// "x12:P:ZZ:A:ZZ:B:000000001:A:B:1:837:0001": what the expression
// regexp_replace(key, '^((?:[^:]*:){6})[^:]*', '\1') gives (a key of
// fewer than seven parts stays as it is), stored in inbox.key_sans_isa13.
func keySansISA13(key string) string {
	sixth := -1
	n := 0
	for i := 0; i < len(key); i++ {
		if key[i] != ':' {
			continue
		}
		if n++; n == 6 {
			sixth = i
			break
		}
	}
	if sixth < 0 {
		return key
	}
	if j := strings.IndexByte(key[sixth+1:], ':'); j >= 0 {
		return key[:sixth+1] + key[sixth+1+j:]
	}
	return key[:sixth+1]
}
