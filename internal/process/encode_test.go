package process

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12/claim"
	"github.com/ediwatch/ediwatch/internal/x12/remit"
	"github.com/ediwatch/ediwatch/internal/x12/x12test"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// reflectEffects is how effects were built with encoding/json before the
// hand-written encoders: the reference they must match byte for byte.
func reflectEffects(ix *envelope.Interchange, s *Set) []Effect {
	withEnvelope := func(head any, doc []byte) json.RawMessage {
		h := mustJSON(head)
		if len(doc) <= 2 {
			return h
		}
		return append(append(h[:len(h)-1:len(h)-1], ','), doc[1:]...)
	}
	digest := func(parts ...string) string {
		b, _ := json.Marshal(parts)
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	var out []Effect
	switch {
	case s.Payment != nil:
		p := s.Payment
		doc := mustJSON(p)
		out = append(out, Effect{Kind: KindPayment, Key: "payment:" + p.PayerID + ":" + p.TraceNumber,
			OrderingKey: "payment:" + p.PayerID + ":" + p.TraceNumber, Hash: paymentHash(doc, p.ProductionDate),
			Payload: withEnvelope(struct {
				EnvelopeKey string `json:"envelope_key"`
				ContentHash string `json:"content_hash"`
				Sender      string `json:"sender"`
				Receiver    string `json:"receiver"`
			}{s.Key, s.ContentHash, ix.Sender(), ix.Receiver()}, doc)})
	case s.Claims != nil:
		for _, c := range s.Claims {
			doc := mustJSON(c)
			hash := contentHash(doc)
			out = append(out, Effect{Kind: KindClaim,
				Key:         "claim:" + digest(ix.Sender(), ix.Receiver(), c.ClaimID, c.Frequency, hash),
				OrderingKey: "claimorder:" + digest(ix.Sender(), ix.Receiver(), c.ClaimID), Hash: hash,
				Payload: withEnvelope(struct {
					EnvelopeKey string `json:"envelope_key"`
					Sender      string `json:"sender"`
					Receiver    string `json:"receiver"`
				}{s.Key, ix.Sender(), ix.Receiver()}, doc)})
		}
	}
	return out
}

func sameEffects(t *testing.T, what string, got, want []Effect) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d effects, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.Key != w.Key || g.OrderingKey != w.OrderingKey || g.Hash != w.Hash || g.Answers != w.Answers {
			t.Fatalf("%s effect %d:\n got %+v\nwant %+v", what, i, g, w)
		}
		if !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("%s effect %d payload:\n got %s\nwant %s", what, i, g.Payload, w.Payload)
		}
	}
}

// TestEffectsMatchEncodingJSON: payloads, effect keys and effect hashes
// built by the hand-written encoders are byte for byte those encoding/json
// built, for every 835 and 837 set of the public corpus, generated files,
// and random payments and claims with awkward strings and envelopes.
func TestEffectsMatchEncodingJSON(t *testing.T) {
	check := func(name string, data []byte) int {
		n := 0
		rd := envelope.NewReader(bytes.NewReader(data), envelope.Options{KeepSegments: true})
		for {
			k, err := rd.Next()
			if err != nil {
				break
			}
			if k != envelope.KindSet {
				continue
			}
			s := &Set{Key: rd.Set().Key, ContentHash: rd.Set().HashHex()}
			switch rd.Set().Type {
			case "835":
				s.Payment, _ = remit.Parse(rd.Set().Segments())
			case "837":
				s.Claims, _ = claim.Parse(rd.Set().Segments())
			default:
				continue
			}
			sameEffects(t, name, effects(rd.Interchange(), s, nil), reflectEffects(rd.Interchange(), s))
			n++
		}
		return n
	}
	total := 0
	err := filepath.WalkDir(testenv.Corpus(t), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		total += check(path, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total < 20 {
		t.Fatalf("only %d 835 and 837 sets in the corpus", total)
	}
	var b bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 3, ClaimsPerSet: 4, LinesPerClaim: 2}).Write(&b); err != nil {
		t.Fatal(err)
	}
	check("generated 835", b.Bytes())
	b.Reset()
	if err := (x12gen.Claims{Claims: 5}).Write(&b); err != nil {
		t.Fatal(err)
	}
	check("generated 837", b.Bytes())

	r := rand.New(rand.NewPCG(14, 999))
	for range 1000 {
		ix := &envelope.Interchange{SenderQualifier: x12test.String(r), SenderID: x12test.String(r),
			ReceiverQualifier: x12test.String(r), ReceiverID: x12test.String(r)}
		s := &Set{Key: x12test.String(r), ContentHash: x12test.String(r)}
		if r.IntN(2) == 0 {
			s.Payment = &remit.Payment{}
			x12test.Fill(r, s.Payment)
		} else {
			s.Claims = make([]claim.Claim, 1+r.IntN(3))
			for i := range s.Claims {
				x12test.Fill(r, &s.Claims[i])
			}
		}
		sameEffects(t, "random", effects(ix, s, nil), reflectEffects(ix, s))
	}
}

// TestEffectsOfFileMatchEncodingJSON: the effects File emits for a
// generated 835 are those of the reflective path.
func TestEffectsOfFileMatchEncodingJSON(t *testing.T) {
	var b bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 2, ClaimsPerSet: 3}).Write(&b); err != nil {
		t.Fatal(err)
	}
	rd := envelope.NewReader(bytes.NewReader(b.Bytes()), envelope.Options{KeepSegments: true})
	var want [][]Effect
	for {
		k, err := rd.Next()
		if err != nil {
			break
		}
		if k == envelope.KindSet {
			p, _ := remit.Parse(rd.Set().Segments())
			want = append(want, reflectEffects(rd.Interchange(), &Set{Key: rd.Set().Key, ContentHash: rd.Set().HashHex(), Payment: p}))
		}
	}
	i := 0
	_, err := File(context.Background(), bytes.NewReader(b.Bytes()), Config{ControlNumbers: &ack.MemoryControlNumbers{}}, func(it Item) error {
		if it.Set != nil {
			sameEffects(t, "file", it.Set.Effects, want[i])
			i++
		}
		return nil
	})
	if err != nil || i != len(want) {
		t.Fatalf("%d sets of %d: %v", i, len(want), err)
	}
}

// TestSummaryJSONMatchesEncodingJSON: AppendSummaryJSON writes what
// json.Marshal writes for Summary, for every set of the corpus, and
// nothing for a set without a document.
func TestSummaryJSONMatchesEncodingJSON(t *testing.T) {
	n := 0
	err := filepath.WalkDir(testenv.Corpus(t), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		File(context.Background(), bytes.NewReader(data), Config{NoAcks: true}, func(it Item) error {
			if it.Set == nil {
				return nil
			}
			got, ok := it.Set.AppendSummaryJSON([]byte("x"))
			sum := it.Set.Summary()
			if sum == nil {
				if ok || string(got) != "x" {
					t.Errorf("%s: summary %s for a set without one", path, got)
				}
				return nil
			}
			want, _ := json.Marshal(sum)
			if !ok || string(got) != "x"+string(want) {
				t.Errorf("%s: summary %s, want %s", path, got, want)
			}
			n++
			return nil
		})
		return nil
	})
	if err != nil || n < 20 {
		t.Fatalf("%d summaries: %v", n, err)
	}
}
