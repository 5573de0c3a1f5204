package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// BenchmarkIngestWithConsoleIndexes measures what migration 0009's
// indexes (correlation id of the ledger, inbox, sightings and outbox, for
// the console's file page) cost an ingest: one 837 of 2,000 claims and one
// 835 of 500 sets per round, into a store with the indexes and one with
// them dropped, in alternating rounds so drift hits both alike; it reports
// the ratio of the times (1.00: no cost).
// Run: go test ./internal/store/sqlite -run XXX -bench IngestWithConsoleIndexes -benchtime 1x
func BenchmarkIngestWithConsoleIndexes(b *testing.B) {
	ctx := context.Background()
	with, without := newStore(b).(*Store), newStore(b).(*Store)
	for _, idx := range []string{"remote_file_correlation", "inbox_correlation", "sighting_correlation", "outbox_correlation"} {
		if _, err := without.db.ExecContext(ctx, "DROP INDEX "+idx); err != nil {
			b.Fatal(err)
		}
	}
	var tWith, tWithout time.Duration
	round := 0
	ingest := func(s *Store) time.Duration {
		round++
		var claims, remit bytes.Buffer
		x12gen.Claims{Control: round, Claims: 2000, IDPrefix: fmt.Sprintf("B%d-", round)}.Write(&claims)
		x12gen.Remit{Control: 100000 + round, SetsPerGroup: 500, Trace: fmt.Sprintf("T%d-", round)}.Write(&remit)
		start := time.Now()
		for i, data := range [][]byte{claims.Bytes(), remit.Bytes()} {
			if _, err := inbox.Ingest(ctx, inbox.Options{Store: s, Routes: storetest.Routes}, inbox.FileInfo{Source: "bench",
				Path: fmt.Sprintf("f%d-%d", round, i), Size: int64(len(data)), MTime: time.Now(), SHA256: "x",
				CorrelationID: fmt.Sprintf("c%d-%d", round, i), Now: time.Now()}, bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	const rounds = 10
	for i := range rounds {
		if i%2 == 0 {
			tWith += ingest(with)
			tWithout += ingest(without)
		} else {
			tWithout += ingest(without)
			tWith += ingest(with)
		}
	}
	b.ReportMetric(tWith.Seconds()/rounds, "s/round-with")
	b.ReportMetric(tWithout.Seconds()/rounds, "s/round-without")
	b.ReportMetric(float64(tWith)/float64(tWithout), "with/without")
}
