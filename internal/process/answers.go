package process

import (
	"context"
	"fmt"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12/answer"
	"github.com/ediwatch/ediwatch/internal/x12/claim"
)

// Originals finds, among what ediwatch received before, what a received
// acknowledgment answers. It is asked while a file is processed, outside
// any ingestion transaction, so its answer may be stale: an original
// ingested at the same moment, or pruned, is not named. An event names
// its original as a courtesy to the receiver; its key and business hash
// never depend on it.
type Originals interface {
	// SetKey returns the key of a processed inbox row that starts with
	// prefix and ends with suffix, with exactly one key part between them
	// (the interchange control number the acknowledgment does not
	// carry), or with anything after prefix when suffix is empty; "" when
	// there is none.
	SetKey(ctx context.Context, prefix, suffix string) (string, error)
	// ClaimKey returns the effect key of the last claim.received effect
	// with the ordering key, or "" when there is none.
	ClaimKey(ctx context.Context, orderingKey string) (string, error)
}

// AckReceivedEvent is the payload of ack.received: one acknowledgment a
// partner sent, of one transaction set (999 AK2) or interchange (TA1).
type AckReceivedEvent struct {
	// EnvelopeKey is the 999's own set key, or the key of the interchange
	// that carried the TA1.
	EnvelopeKey string `json:"envelope_key"`
	// OriginalKey is the envelope key of the set (999) or interchange
	// (TA1) acknowledged, when it passed through ediwatch.
	OriginalKey string `json:"original_key,omitempty"`
	Sender      string `json:"sender"`
	Receiver    string `json:"receiver"`
	answer.Ack
}

// ClaimStatusEvent is the payload of claim.status: one status of a
// received 277CA.
type ClaimStatusEvent struct {
	EnvelopeKey string `json:"envelope_key"`
	// OriginalKey is the claim.received effect key of the claim, when it
	// passed through ediwatch.
	OriginalKey string `json:"original_key,omitempty"`
	Sender      string `json:"sender"`
	Receiver    string `json:"receiver"`
	answer.ClaimStatus
}

// answersOnly reports whether a group holds acknowledgments alone (999 or
// 997 sets, or 277 sets when its source does not ask them acknowledged):
// ediwatch never acknowledges an acknowledgment, whatever the group's
// GS01 says.
func answersOnly(sets []ack.SetResult, ack277 bool) bool {
	for _, s := range sets {
		switch {
		case s.Type == "999" || s.Type == "997":
		case s.Type == "277" && !ack277:
		default:
			return false
		}
	}
	return len(sets) > 0
}

// onlyAckSets reports whether a group holds 999 or 997 sets alone: its
// interchange gets no TA1 then, whatever the group's GS01 says.
func onlyAckSets(sets []ack.SetResult) bool {
	for _, s := range sets {
		if s.Type != "999" && s.Type != "997" {
			return false
		}
	}
	return len(sets) > 0
}

// answerEffects returns the effects of a received 999 or 277CA, naming
// their originals when orig finds them.
func answerEffects(ctx context.Context, orig Originals, ix *envelope.Interchange, g *envelope.Group,
	s *Set) ([]Effect, error) {
	sender, receiver := ix.Sender(), ix.Receiver()
	var out []Effect
	for _, a := range s.Acks {
		ev := AckReceivedEvent{Sender: sender, Receiver: receiver, Ack: a}
		hash := contentHash(mustJSON(ev))
		k := a.Acknowledges
		key := "ackrcv:" + sender + ":" + receiver + ":999:" + envelope.KeyPart(k.FunctionalID) + ":" +
			envelope.GroupNumberKeyPart(k.GroupControlNumber) + ":" + envelope.KeyPart(k.SetType) + ":" +
			envelope.KeyPart(k.SetControlNumber) + ":" + hash[:16]
		ev.EnvelopeKey = s.Key
		if orig != nil && k.SetType != "" {
			// The acknowledged set went the other way: sender and
			// receiver swapped, GS02 and GS03 too.
			prefix := "x12:" + envelope.KeyPart(ix.Usage) + ":" + envelope.KeyPart(ix.ReceiverQualifier) + ":" +
				envelope.KeyPart(ix.ReceiverID) + ":" + envelope.KeyPart(ix.SenderQualifier) + ":" +
				envelope.KeyPart(ix.SenderID) + ":"
			suffix := ":" + envelope.KeyPart(g.ReceiverCode) + ":" + envelope.KeyPart(g.SenderCode) + ":" +
				envelope.GroupNumberKeyPart(k.GroupControlNumber) + ":" + envelope.KeyPart(k.SetType) + ":" +
				envelope.KeyPart(k.SetControlNumber)
			var err error
			if ev.OriginalKey, err = orig.SetKey(ctx, prefix, suffix); err != nil {
				return nil, fmt.Errorf("look up the set a 999 answers: %w", err)
			}
		}
		out = append(out, Effect{Kind: KindAckReceived, Key: key, OrderingKey: "ackrcv:" + sender, Hash: hash,
			Payload: mustJSON(ev)})
	}
	for _, st := range s.Statuses {
		ev := ClaimStatusEvent{Sender: sender, Receiver: receiver, ClaimStatus: st}
		hash := contentHash(mustJSON(ev))
		// The key is the digest alone: a claim status names a patient
		// control number.
		e := Effect{Kind: KindClaimStatus, Key: "claimstatus:" + hash, OrderingKey: "claimstatus:" + sender, Hash: hash}
		ev.EnvelopeKey = s.Key
		if st.Level == answer.LevelClaim && st.PatientControlNumber != "" {
			// The claim went the other way; its statuses are ordered
			// after it, by its own ordering key.
			c := claim.Claim{ClaimID: st.PatientControlNumber}
			e.OrderingKey = claim.OrderingKey(receiver, sender, c)
			if orig != nil {
				var err error
				if ev.OriginalKey, err = orig.ClaimKey(ctx, e.OrderingKey); err != nil {
					return nil, fmt.Errorf("look up the claim a 277CA answers: %w", err)
				}
			}
		}
		e.Payload = mustJSON(ev)
		out = append(out, e)
	}
	return out, nil
}

// ta1Effect returns the ack.received effect of a TA1 segment received in
// ix, naming the interchange it answers when orig finds it.
func ta1Effect(ctx context.Context, orig Originals, ix *envelope.Interchange, t envelope.TA1) (Effect, error) {
	sender, receiver := ix.Sender(), ix.Receiver()
	ev := AckReceivedEvent{Sender: sender, Receiver: receiver, Ack: answer.FromTA1(t)}
	hash := contentHash(mustJSON(ev))
	ctl := envelope.InterchangeNumberKeyPart(t.ControlNumber)
	key := "ackrcv:" + sender + ":" + receiver + ":TA1:" + ctl + ":" + hash[:16]
	ev.EnvelopeKey = ix.Key()
	if orig != nil {
		original := "x12:" + envelope.KeyPart(ix.Usage) + ":" + envelope.KeyPart(ix.ReceiverQualifier) + ":" +
			envelope.KeyPart(ix.ReceiverID) + ":" + envelope.KeyPart(ix.SenderQualifier) + ":" +
			envelope.KeyPart(ix.SenderID) + ":" + ctl
		k, err := orig.SetKey(ctx, original+":", "")
		if err != nil {
			return Effect{}, fmt.Errorf("look up the interchange a TA1 answers: %w", err)
		}
		if k != "" {
			ev.OriginalKey = original
		}
	}
	return Effect{Kind: KindAckReceived, Key: key, OrderingKey: "ackrcv:" + sender, Hash: hash,
		Payload: mustJSON(ev)}, nil
}
