package outbox_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
)

// TestUnreadablePayloadIsDeadLetteredAndTheOthersDelivered: a stored
// payload that does not unpack (the database damaged or edited by hand)
// is never sent: its row is dead-lettered with the reason, nothing is
// posted for it, and the rows claimed beside it are delivered. Before,
// the whole claim failed after it had marked the batch in flight, and
// the batch came back with the bad row, failing again, without end.
func TestUnreadablePayloadIsDeadLetteredAndTheOthersDelivered(t *testing.T) {
	rc := newReceiver(t, func(int) (int, http.Header) { return 200, nil })
	h := newHarness(t, rc, outbox.RelayConfig{})
	ctx := context.Background()
	if _, err := h.st.(*sqlite.Store).DB().ExecContext(ctx,
		`UPDATE outbox SET stored_payload = x'01ffffffffff' WHERE kind = 'payment.posted'`); err != nil {
		t.Fatal(err)
	}
	h.round(t)
	p := h.payment(t)
	if p.Status != outbox.StatusDead || !strings.Contains(p.LastError, "corrupt") {
		t.Errorf("the unreadable payment: %s %q", p.Status, p.LastError)
	}
	if n := len(rc.got()); n != 0 {
		t.Errorf("%d requests posted for an unreadable payload", n)
	}
	c, err := h.st.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Outbox[outbox.StatusDelivered] == 0 || c.Outbox[outbox.StatusInflight] != 0 || c.Outbox[outbox.StatusPending] != 0 {
		t.Errorf("outbox %v, want the other rows delivered", c.Outbox)
	}
}
