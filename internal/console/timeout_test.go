package console_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/inbox"
)

// stalledFiles is a store whose files list answers only when its
// context ends, and says how it ended.
type stalledFiles struct {
	console.Store
	ended chan error
}

func (s *stalledFiles) ListFiles(ctx context.Context, f inbox.FileFilter, limit int) ([]inbox.FileRow, error) {
	<-ctx.Done()
	s.ended <- ctx.Err()
	return nil, ctx.Err()
}

// TestPageReadsEndAtTheQueryTimeout: a page whose store does not answer
// fails at the console's query timeout, its read cancelled, rather than
// holding a connection of the console's pool for as long as the store
// takes.
func TestPageReadsEndAtTheQueryTimeout(t *testing.T) {
	st := &stalledFiles{Store: memStore(t), ended: make(chan error, 1)}
	srv := serve(t, st, func(c *console.Config) { c.QueryTimeout = 300 * time.Millisecond })
	req, _ := http.NewRequest("GET", srv.URL+"/files", nil)
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the page never answered: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 500 {
		t.Errorf("a page whose read timed out: %d", resp.StatusCode)
	}
	select {
	case err := <-st.ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the read ended with %v, want the query timeout", err)
		}
	default:
		t.Fatal("the read was never cancelled")
	}
}
