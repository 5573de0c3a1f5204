package poller_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// unreachable is a drop this replica cannot reach (its route to the
// server, its egress address, its DNS), while the store is fine.
type unreachable struct{ local.Source }

func (unreachable) List(ctx context.Context, dir string) ([]poller.Entry, error) {
	return nil, errors.New("dial tcp: connection refused")
}

// TestReplicaThatCannotListHandsTheDirectoryOver: a replica that reaches
// the store but not the drop does not keep the directory's lease from a
// replica that can list it; that replica takes the directory over at its
// next poll, and keeps it.
func TestReplicaThatCannotListHandsTheDirectoryOver(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "a.835", storetest.Fixture(t, "835_canonical.x12"))
	cut := newHarness(t, unreachable{}, []string{dir}, func(c *poller.Config) { c.Holder, c.LeaseTTL = "cut", time.Hour })
	ok := newHarnessOn(t, cut.st, local.Source{}, []string{dir}, func(c *poller.Config) { c.Holder, c.LeaseTTL = "ok", time.Hour })
	ctx := context.Background()
	if _, err := cut.p.PollOnce(ctx); err == nil {
		t.Fatal("a poll of an unreachable drop succeeded")
	}
	for range 3 {
		ok.poll(t)
		cut.p.PollOnce(ctx) // the directory is polled by the other replica
	}
	if c := ok.counts(t); c.Inbox["processed"] != 1 || c.Files["ingested"] != 1 {
		t.Errorf("counts %+v: the replica that can list never got the directory", c)
	}
}
