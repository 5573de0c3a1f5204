package sftp

import (
	"context"
	"testing"

	"github.com/pkg/sftp"
)

// TestAFailureOnAnOldConnectionSparesTheNewOne: a call in flight on a
// connection that broke (its keepalive dropped it) fails after another
// worker has already connected again; that failure must not close the new,
// healthy connection under the other worker's calls.
func TestAFailureOnAnOldConnectionSparesTheNewOne(t *testing.T) {
	src, _ := openSSH(t)
	ctx := context.Background()
	var fresh *sftp.Client
	err := src.Do(ctx, func(old *sftp.Client) error {
		src.mu.Lock()
		sc := src.ssh
		src.mu.Unlock()
		src.drop(sc) // the keepalive finds the connection dead
		if err := src.Do(ctx, func(c *sftp.Client) error { fresh = c; return nil }); err != nil {
			t.Fatalf("reconnecting: %v", err)
		}
		_, err := old.Stat("/")
		return err // the call in flight on the old connection fails
	})
	if err == nil {
		t.Fatal("a call on a dropped connection succeeded")
	}
	if fresh == nil {
		t.Fatal("no new connection")
	}
	if _, err := fresh.Stat("/"); err != nil {
		t.Errorf("the new connection was closed by the old one's failure: %v", err)
	}
}
