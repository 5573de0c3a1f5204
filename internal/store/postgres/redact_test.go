package postgres

import (
	"context"
	"strings"
	"testing"
)

// TestOpenRedactsKeywordValuePassword: a store.dsn_file may hold a
// keyword/value DSN, and a typo in it must not print its password. pgx
// redacts "password=…" alone; "password = …" (spaces are allowed around
// "=") and a missing "=" passed through it into the error.
func TestOpenRedactsKeywordValuePassword(t *testing.T) {
	for _, dsn := range []string{
		"host=127.0.0.1 user=u password = s3cret sslmode=bogus",
		"host=127.0.0.1 user=u password s3cret",
		"host=127.0.0.1 user=u password = s3cret port=x",
		"host=127.0.0.1 user=u password= 's3 cret' target_session_attrs=x",
		"postgresql://u:s3cret@127.0.0.1:x/db",
	} {
		_, err := Open(context.Background(), dsn, Options{})
		if err == nil {
			t.Fatalf("%q opened", dsn)
		}
		if strings.Contains(err.Error(), "s3") {
			t.Errorf("the error shows the password: %v", err)
		}
		if !strings.HasPrefix(err.Error(), "postgres: parse dsn: ") || len(err.Error()) <= len("postgres: parse dsn: ") {
			t.Errorf("the error says nothing of what is wrong: %v", err)
		}
	}
}
