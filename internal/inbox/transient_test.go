package inbox_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestIngestedPayloadsAreThoseOfProcessingEachSetApart: an ingest reads
// its sets with process.Config.Transient (documents and payloads in memory
// reused from set to set), and writes them while it parses (PipeFrom 1)
// or after; every payload the store then delivers is, byte for byte, the
// one processing without Transient gives its effect. The file interleaves
// sets claimed before (their documents read by the same parsers, no
// payload) with new 835s of differing sizes and 837s of one claim and of
// sixty, a set of many claims being followed by a set of few.
func TestIngestedPayloadsAreThoseOfProcessingEachSetApart(t *testing.T) {
	remit := func(r x12gen.Remit) []byte {
		var b bytes.Buffer
		if _, err := r.Write(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	seen := remit(x12gen.Remit{Trace: "SEEN", Control: 1, SetsPerGroup: 40, ClaimsPerSet: 3})
	seenClaims := claims(x12gen.Claims{Control: 2, Claims: 60, IDPrefix: "SEEN-CLAIM-"})
	file := bytes.Join([][]byte{
		seen,
		claims(x12gen.Claims{Control: 3, Claims: 60, IDPrefix: "A-LONGER-CLAIM-ID-"}),
		remit(x12gen.Remit{Trace: "NEWBIG", Control: 4, SetsPerGroup: 20, ClaimsPerSet: 6, LinesPerClaim: 3}),
		seenClaims,
		claims(x12gen.Claims{Control: 5, Claims: 1, IDPrefix: "S"}),
		remit(x12gen.Remit{Trace: "N", Control: 6, SetsPerGroup: 30}),
		claims(x12gen.Claims{Control: 7, Claims: 3, IDPrefix: "M", Frequency: "7"}),
	}, nil)

	// The payload of every effect, processed without Transient.
	want := map[string]string{}
	for _, data := range [][]byte{seen, seenClaims, file} {
		if _, err := process.File(context.Background(), bytes.NewReader(data),
			process.Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 1}}, func(it process.Item) error {
				if it.Set != nil {
					for _, e := range it.Set.Effects {
						want[e.Key] = string(e.Payload)
					}
				}
				return nil
			}); err != nil {
			t.Fatal(err)
		}
	}

	for _, pipeFrom := range []int{0, 1} {
		t.Run(fmt.Sprint("pipeFrom", pipeFrom), func(t *testing.T) {
			eachStore(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				first := append(append([]byte(nil), seen...), seenClaims...)
				if _, err := ingestWith(ctx, s, pipeFrom, "first", bytes.NewReader(first), len(first)); err != nil {
					t.Fatal(err)
				}
				r, err := ingestWith(ctx, s, pipeFrom, "file", bytes.NewReader(file), len(file))
				if err != nil {
					t.Fatal(err)
				}
				if d, p := r.Count(inbox.Duplicate), r.Count(inbox.Processed); d != 41 || p != 53 {
					t.Fatalf("%d duplicates, %d processed; want 41 and 53", d, p)
				}
				rows := flat(deliver(t, s, "ledger"))
				if len(rows) != len(want) {
					t.Errorf("%d rows delivered, %d effects", len(rows), len(want))
				}
				for _, row := range rows {
					if w, ok := want[row.EffectKey]; !ok || string(row.Payload) != w {
						t.Errorf("%s %s: payload\n%s\nwant\n%s", row.Kind, row.EffectKey, row.Payload, w)
					}
				}
			})
		})
	}
}
