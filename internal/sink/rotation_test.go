package sink

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSecretRotation walks the rotation README describes, against a real
// HTTP receiver that verifies with one secret and answers 401 otherwise:
// the operator adds the new secret to secret_file beside the old one (every
// request now carries both signatures), the receiver switches to the new
// secret alone and keeps accepting, then the old line is removed; a
// receiver still on the old secret is refused once it is gone.
func TestSecretRotation(t *testing.T) {
	const oldSecret, newSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kIHNlY3JldCBrZXk="
	receiverKnows := oldSecret
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !Verify(receiverKnows, r.Header, body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	secretFile := filepath.Join(t.TempDir(), "ledger.secret")
	deliver := func(lines string) Result {
		t.Helper()
		if err := os.WriteFile(secretFile, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		secrets, err := SecretsFromFile(secretFile)
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(Config{Name: "ledger", URL: srv.URL, Secrets: secrets, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return h.Deliver(context.Background(), Message{EffectKey: "payment:k1", Kind: "payment.posted",
			CorrelationID: "c", Payload: []byte(`{"amount":"1.00"}`), CreatedAt: time.Now()}, time.Now())
	}
	steps := []struct {
		name, secretFile, receiver string
		want                       Outcome
	}{
		{"before: old secret on both sides", oldSecret + "\n", oldSecret, Delivered},
		{"new secret added beside the old; receiver still on the old", oldSecret + "\n" + newSecret + "\n", oldSecret, Delivered},
		{"receiver switched to the new secret alone", "# rotation 2026-12\n" + oldSecret + "\n" + newSecret + "\n", newSecret, Delivered},
		{"old secret removed", newSecret + "\n", newSecret, Delivered},
		{"a receiver left on the old secret is refused", newSecret + "\n", oldSecret, Dead},
	}
	for _, st := range steps {
		receiverKnows = st.receiver
		if got := deliver(st.secretFile); got.Outcome != st.want {
			t.Errorf("%s: outcome %v (HTTP %d), want %v", st.name, got.Outcome, got.Status, st.want)
		}
	}
}
