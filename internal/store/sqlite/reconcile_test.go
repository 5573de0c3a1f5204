package sqlite

import (
	"context"
	"testing"

	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestReconcileReadsNoPayload: see storetest.ReconcileReadsNoPayload.
func TestReconcileReadsNoPayload(t *testing.T) {
	s := newStore(t).(*Store)
	storetest.ReconcileReadsNoPayload(t, s, func(ctx context.Context) (map[string][]byte, error) {
		rows, err := s.db.QueryContext(ctx, `SELECT effect_key, stored_payload FROM outbox WHERE kind = 'payment.posted'`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string][]byte{}
		for rows.Next() {
			var key string
			var p []byte
			if err := rows.Scan(&key, &p); err != nil {
				return nil, err
			}
			out[key] = p
		}
		return out, rows.Err()
	}, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, `UPDATE outbox SET stored_payload = X'01FFFF' WHERE kind = 'payment.posted'`)
		return err
	})
}
