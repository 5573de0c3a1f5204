// Package process turns one X12 file into what ediwatch records and
// delivers: per transaction set its key, content hash, outcome and business
// effects (payment.posted, claim.received, and for what partners send back
// ack.received and claim.status), and per group and interchange the
// acknowledgments (ack.999, ack.ta1). It is the one path shared by the
// poller, `ediwatch ingest`, `inspect` and `ack`.
//
// A file is read twice: an envelope-only pass learns which interchanges
// and groups are rejected (known only at their trailers), then a second
// pass parses documents one set at a time. Memory is bounded by the largest
// transaction set, never the file.
package process

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12/answer"
	"github.com/ediwatch/ediwatch/internal/x12/claim"
	"github.com/ediwatch/ediwatch/internal/x12/remit"
)

// Effect kinds.
const (
	KindPayment = "payment.posted"
	KindClaim   = "claim.received"
	KindAck999  = "ack.999"
	KindAckTA1  = "ack.ta1"
	// KindAckReceived is a partner's 999 (one per AK2) or TA1 (one per
	// segment) received; KindClaimStatus a 277CA claim status received.
	KindAckReceived = "ack.received"
	KindClaimStatus = "claim.status"
)

// EffectKinds returns every effect kind, the ones a route may name.
func EffectKinds() []string {
	return []string{KindPayment, KindClaim, KindAck999, KindAckTA1, KindAckReceived, KindClaimStatus}
}

// OptionalKind reports whether a configuration may leave kind unrouted:
// the events of received acknowledgments are recorded only where routed,
// so a configuration written before them stays valid.
func OptionalKind(kind string) bool { return kind == KindAckReceived || kind == KindClaimStatus }

// Effect is a side effect to deliver: its business key is unique in the
// outbox, so the same business fact is never posted twice.
type Effect struct {
	Kind        string
	Key         string
	OrderingKey string
	Payload     json.RawMessage
	// Hash is the SHA-256 (hex) of the effect's business content, without
	// envelope keys or control numbers: the same effect key with another
	// hash is an effect conflict, never a business duplicate.
	Hash string
	// Answers is, for an acknowledgment, the envelope key prefix of the
	// sets it answers.
	Answers string
}

// Status is what processing decided for a set.
type Status string

const (
	// Processed: the set is valid (perhaps with errors noted, IK5 E) and
	// its effects are to be posted.
	Processed Status = "processed"
	// Rejected: the set, its group or its interchange failed validation;
	// it posts nothing and its 999 or TA1 says why.
	Rejected Status = "rejected"
)

// Set is the result of one transaction set.
type Set struct {
	Key           string
	ContentHash   string
	Type          string
	ControlNumber string
	// Normal: the set's segments were in normal form as read
	// (envelope.Set.Normal).
	Normal bool
	Status Status
	// Reason says why a set was rejected, without patient data.
	Reason string
	// Errors are the set's envelope errors; Problems its content errors.
	Errors   []*envelope.ParseError
	Problems []x12.Problem
	// Payment or Claims hold the parsed document of an 835 or 837.
	Payment *remit.Payment
	Claims  []claim.Claim
	// Acks hold a received 999's acknowledgments, Statuses a received
	// 277CA's claim statuses.
	Acks     []answer.Ack
	Statuses []answer.ClaimStatus
	// Effects are the business effects of a processed set.
	Effects []Effect
}

// Summary returns the document summary shown by `inspect`, without patient
// data, or nil for a set of another type.
func (s *Set) Summary() any {
	switch {
	case s.Payment != nil:
		return s.Payment.Summary()
	case s.Claims != nil:
		return claim.Summarize(s.Claims)
	}
	return nil
}

// AppendSummaryJSON appends the JSON encoding of Summary, the bytes
// json.Marshal writes for it, without reflection. It reports false, dst
// unchanged, for a set of another type (whose Summary is nil).
func (s *Set) AppendSummaryJSON(dst []byte) ([]byte, bool) {
	switch {
	case s.Payment != nil:
		sum := s.Payment.Summary()
		return sum.AppendJSON(dst), true
	case s.Claims != nil:
		sum := claim.Summarize(s.Claims)
		return sum.AppendJSON(dst), true
	}
	return dst, false
}

// Item is one thing a file yields, in file order: a Set, an
// acknowledgment Effect (ours to send) once its group or interchange is
// complete, or the event of a received TA1.
type Item struct {
	Set *Set
	Ack *Effect
	// Received is the ack.received event of a TA1 segment the file
	// carries (not part of any set), once its interchange is complete.
	Received *Effect
}

// Config is what processing needs besides the file.
type Config struct {
	// ControlNumbers allocates our outbound ISA13/GS06. Required.
	ControlNumbers ack.ControlNumbers
	// Ack shapes the acknowledgments (our ids, clock).
	Ack ack.Options
	// NoAcks skips building acknowledgments.
	NoAcks bool
	// Envelope options for the reader (KeepSegments is always set).
	Envelope envelope.Options
	// Claims, when set, says which sets are claimed already (an ingest's
	// lookup). It is called once after the envelope pass with the keys
	// of the file's sets, in file order. The function it returns (nil:
	// none) is called
	// once for each set, in file order, once the set is read and just
	// before it is processed and emitted; see Known for what its answers
	// change.
	Claims func(ctx context.Context, keys []string) (func(s *envelope.Set) Known, error)
	// Originals, when set, names what ediwatch received before that a
	// received acknowledgment answers (see Originals); nil: nothing is
	// looked up.
	Originals Originals
	// Transient: every set's document (Payment, Claims, as for a Claimed
	// set) and its effects' payloads are valid only until emit returns:
	// the document parsers and the payloads' buffer are reused from set
	// to set, so a large file's documents are not allocated set by set.
	Transient bool
}

// Known is what the caller of File knows of a set (Config.Claims).
type Known uint8

const (
	// Unknown: the set is processed in full.
	Unknown Known = iota
	// Claimed: the set's key is claimed already, so its effects would be
	// discarded: it gets none. Everything else of it (status, problems,
	// document, acknowledgments) is the same, except that its document
	// (Payment or Claims) is valid only until emit returns: it is read by
	// a parser reused from set to set.
	Claimed
	// ClaimedClean: claimed by a set of the same content hash that was
	// Clean, and Normal itself: its segments are then those of that set,
	// element for element, and as clean, so its document is not read at
	// all (no Payment, Claims or problems: it has none to show), and it
	// gets no effects. Its status, errors and acknowledgments are those
	// of processing in full. (The content hash covers the normal form: a
	// set that is not Normal may read otherwise than its normal form,
	// "20261101:" is no date, so it is read.)
	ClaimedClean
)

// Clean reports whether nothing of s but its envelope shows in its
// group's 999 or its report, and whether any Normal set of its content
// hash reads as it does: processed, its document read without a single
// problem and, for a payment, balanced, its segments Normal.
func (s *Set) Clean() bool {
	return s.Normal && s.Status == Processed && len(s.Problems) == 0 && len(s.Errors) == 0 &&
		(s.Payment == nil || s.Payment.Balance.Balanced)
}

// File processes the file r and calls emit with every item in file order.
// It returns what belongs to the file alone (envelope.Scan): whether it is
// X12, its key and errors when it is not, its warning counts. Nothing of
// its interchanges, groups or sets is kept past their turn (their
// verdicts were acted on, their sets emitted), so memory grows neither
// with the number of sets nor with the number of interchanges and groups.
// r is read twice (it is rewound). An error from emit stops processing and
// is returned; ctx cancellation is checked between sets.
func File(ctx context.Context, r io.ReadSeeker, cfg Config, emit func(Item) error) (*envelope.File, error) {
	if cfg.ControlNumbers == nil && !cfg.NoAcks {
		return nil, errors.New("process: no control number allocator")
	}
	// Pass 1: the envelope alone, to know the verdict of every interchange
	// and group before any set in it is processed (an IEA or GE error
	// comes after the sets it rejects). Only the verdicts are kept, a few
	// words per interchange and group, and the sets' keys for Claims.
	// Its sets' content hashes are never read (pass 2 hashes each set
	// again), so it does not take them.
	pass1 := cfg.Envelope
	pass1.NoContentHash = true
	var ixVerdicts []interchangeVerdict
	var groupVerdicts []verdict
	var keys []string
	summary, err := envelope.Scan(r, pass1, func(k envelope.Kind, rd *envelope.Reader) error {
		switch k {
		case envelope.KindSet:
			if cfg.Claims != nil {
				keys = append(keys, rd.Set().Key)
			}
		case envelope.KindGroupEnd:
			groupVerdicts = append(groupVerdicts, verdictOf(rd.Group().Errors))
		case envelope.KindInterchangeEnd:
			v := interchangeVerdict{verdict: verdictOf(rd.Interchange().Errors), groupsTo: len(groupVerdicts)}
			ixVerdicts = append(ixVerdicts, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read envelope: %w", err)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewind: %w", err)
	}
	if !summary.X12 {
		return summary, nil
	}
	var known func(s *envelope.Set) Known
	if cfg.Claims != nil {
		if known, err = cfg.Claims(ctx, keys); err != nil {
			return nil, err
		}
		keys = nil
	}
	opts := cfg.Envelope
	opts.KeepSegments = true
	rd := envelope.NewReader(r, opts)
	ixIndex, groupIndex, groupsFrom := 0, 0, 0
	// allFA: every group of the interchange so far is FA (onlyAcks).
	allFA := true
	var results []ack.SetResult
	var types, impls Repeated
	reuse := parsers{transient: cfg.Transient}
	// groupsAreAcks: every group of the interchange so far is FA or holds
	// only 999 and 997 sets (a partner's GS01 may be wrong).
	groupsAreAcks := true
	// groupHash digests the content hashes of the group's sets so far.
	groupHash, hashText := sha256.New(), []byte(nil)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		if ixIndex >= len(ixVerdicts) {
			return nil, errors.New("process: the file changed between its two passes")
		}
		verdictIX := ixVerdicts[ixIndex]
		switch k {
		case envelope.KindSet:
			var verdictG verdict
			if groupsFrom+groupIndex < verdictIX.groupsTo {
				verdictG = groupVerdicts[groupsFrom+groupIndex]
			}
			k := Unknown
			if known != nil {
				k = known(rd.Set())
			}
			set, res := processSet(rd.Interchange(), rd.Group(), rd.Set(), verdictIX.verdict, verdictG, k, &reuse)
			if cfg.Originals != nil && set.Effects != nil && (set.Acks != nil || set.Statuses != nil) {
				// Named only now: the lookups are queries, made outside
				// processSet, which stays pure.
				if set.Effects, err = answerEffects(ctx, cfg.Originals, rd.Interchange(), rd.Group(), set); err != nil {
					return nil, err
				}
			}
			// Kept until the group's end, for its 999: of a large group,
			// what a set keeps must be small. Its type and control number
			// are slices of its key (envelope.Set): copied, so the key is
			// let go, and the type and implementation shared with the set
			// before when equal, as they nearly always are.
			res.Type, res.Implementation = types.Of(res.Type), impls.Of(res.Implementation)
			res.ControlNumber = strings.Clone(res.ControlNumber)
			results = append(results, res)
			hashText = append(hashText[:0], set.ContentHash...)
			groupHash.Write(hashText)
			if err := emit(Item{Set: set}); err != nil {
				return nil, err
			}
		case envelope.KindGroupEnd:
			g := rd.Group()
			if !cfg.NoAcks && !verdictIX.rejected && ack.Wants999(g) && !answersOnly(results, cfg.Ack.Ack277) {
				x, err := ack.Build999(ctx, rd.Interchange(), g, results, cfg.ControlNumbers, cfg.Ack)
				if err != nil {
					return nil, err
				}
				d := groupDigest(groupHash, ack.Verdict999(g, results))
				eff := ackEffect(KindAck999, "ack999:"+g.Key()+":"+d, rd.Interchange(), x, g.Key())
				if err := emit(Item{Ack: &eff}); err != nil {
					return nil, err
				}
			}
			groupsAreAcks = groupsAreAcks && (g.FunctionalID == "FA" || onlyAckSets(results))
			allFA = allFA && g.FunctionalID == "FA"
			results = results[:0]
			groupHash.Reset()
			groupIndex++
		case envelope.KindInterchangeEnd:
			// The complete interchange, trailer errors included, as pass 1
			// read it (the same bytes, the same reader); a Reader keeps
			// no groups: groupIndex counted them.
			ix := rd.Interchange()
			if len(ix.TA1) > 0 && ix.EnvelopeValid() {
				for _, t := range ix.TA1 {
					eff, err := ta1Effect(ctx, cfg.Originals, ix, t)
					if err != nil {
						return nil, err
					}
					if err := emit(Item{Received: &eff}); err != nil {
						return nil, err
					}
				}
			}
			// Acknowledgments alone (TA1 segments, FA groups) are never
			// acknowledged.
			onlyAcks := allFA && (groupIndex > 0 || len(ix.TA1) > 0)
			only := onlyAcks || groupIndex > 0 && groupsAreAcks
			groupsAreAcks, allFA = true, true
			if !cfg.NoAcks && ack.WantsTA1(ix, only) {
				x, err := ack.BuildTA1(ctx, ix, cfg.ControlNumbers, cfg.Ack)
				if err != nil {
					return nil, err
				}
				eff := ackEffect(KindAckTA1, "ta1:"+ix.Key()+":"+ack.VerdictTA1(ix), ix, x, ix.Key())
				if err := emit(Item{Ack: &eff}); err != nil {
					return nil, err
				}
			}
			ixIndex++
			groupIndex, groupsFrom = 0, verdictIX.groupsTo
		}
	}
	return summary, nil
}

// groupDigest names a group's content and the verdict of its 999: the
// 999's business key carries it, so a re-sent group with the same content
// is acknowledged once, while a group re-sent under the same control
// numbers after a rejection (other set content, or the same sets with a
// corrected GE or IEA) gets a 999 of its own, with its own verdict.
//
// h holds the group's set content hashes (hex), written in file order.
func groupDigest(h hash.Hash, verdict string) string {
	h.Write([]byte{0})
	h.Write([]byte(verdict))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// verdict is what pass 1 learned of an interchange's envelope or a group:
// whether it is rejected whole, and the code of its first error.
type verdict struct {
	rejected bool
	code     string
}

func verdictOf(errs []*envelope.ParseError) verdict {
	if len(errs) == 0 {
		return verdict{}
	}
	return verdict{rejected: true, code: errs[0].Cause.Code}
}

// interchangeVerdict is an interchange's verdict; its groups' are
// groupVerdicts up to groupsTo, from where the interchange before ended.
type interchangeVerdict struct {
	verdict
	groupsTo int
}

// parsers are the document parsers process.File reuses from set to set for
// the sets Claims marks: their documents are read only for the
// problems (which decide the group's 999) and are consumed by emit.
type parsers struct {
	remit remit.Parser
	claim claim.Parser
	// transient: every set's document is read by these parsers, and its
	// effects' payloads are written into payloads (Config.Transient).
	transient bool
	payloads  []byte
}

func processSet(ix *envelope.Interchange, g *envelope.Group, s *envelope.Set,
	verdictIX, verdictG verdict, known Known, reuse *parsers) (*Set, ack.SetResult) {
	out := &Set{Key: s.Key, ContentHash: s.HashHex(), Type: s.Type, ControlNumber: s.ControlNumber,
		Normal: s.Normal, Status: Processed, Errors: s.Errors}
	segs := s.Segments()
	noEffects := known != Unknown
	reused := noEffects || reuse.transient
	switch {
	case known == ClaimedClean:
		// Read before, when its content was claimed: nothing to show.
	case s.Type == "835" && reused:
		out.Payment, out.Problems = reuse.remit.Parse(segs)
	case s.Type == "835":
		out.Payment, out.Problems = remit.Parse(segs)
	case s.Type == "837" && reused:
		out.Claims, out.Problems = reuse.claim.Parse(segs)
	case s.Type == "837":
		out.Claims, out.Problems = claim.Parse(segs)
	case s.Type == "999" && !noEffects:
		out.Acks = answer.Parse999(segs)
	case answer.Is277CA(s, g) && !noEffects:
		out.Statuses = answer.Parse277CA(segs)
	}
	if reused {
		// The group's results keep the problems until its 999 is built,
		// past the parser's next set.
		out.Problems = cloneProblems(out.Problems)
	}
	res := ack.SetResultOf(s, out.Problems)
	switch {
	case verdictIX.rejected:
		out.Status, out.Reason = Rejected, "interchange rejected: "+verdictIX.code
	case verdictG.rejected:
		out.Status, out.Reason = Rejected, "functional group rejected: "+verdictG.code
	case len(s.Errors) > 0:
		out.Status, out.Reason = Rejected, "transaction set rejected: "+s.Errors[0].Cause.Code
	case x12.Rejects(out.Problems):
		out.Status, out.Reason = Rejected, "content rejected: "+firstRejecting(out.Problems)
	}
	if out.Status == Processed && !noEffects {
		var scratch *[]byte
		if reuse.transient {
			scratch = &reuse.payloads
		}
		out.Effects = effects(ix, out, scratch)
	}
	return out, res
}

// cloneProblems returns ps in memory of its own: a new slice, every
// string copied.
func cloneProblems(ps []x12.Problem) []x12.Problem {
	if len(ps) == 0 {
		return nil
	}
	out := make([]x12.Problem, len(ps))
	for i, p := range ps {
		p.SegmentID, p.Loop, p.SegmentCode = strings.Clone(p.SegmentID), strings.Clone(p.Loop), strings.Clone(p.SegmentCode)
		p.ElementRef, p.ElementCode, p.Value = strings.Clone(p.ElementRef), strings.Clone(p.ElementCode), strings.Clone(p.Value)
		p.Message, p.ContextName, p.ContextValue = strings.Clone(p.Message), strings.Clone(p.ContextName), strings.Clone(p.ContextValue)
		out[i] = p
	}
	return out
}

func firstRejecting(ps []x12.Problem) string {
	for _, p := range ps {
		if p.Reject {
			return p.Error()
		}
	}
	return ""
}

// PaymentEvent is the payload of payment.posted.
type PaymentEvent struct {
	EnvelopeKey string `json:"envelope_key"`
	ContentHash string `json:"content_hash"`
	Sender      string `json:"sender"`
	Receiver    string `json:"receiver"`
	*remit.Payment
}

// ClaimEvent is the payload of claim.received.
type ClaimEvent struct {
	EnvelopeKey string `json:"envelope_key"`
	Sender      string `json:"sender"`
	Receiver    string `json:"receiver"`
	claim.Claim
}

// AckEvent is the payload of ack.999 and ack.ta1: the X12 to send back.
type AckEvent struct {
	// Answers is the envelope key (group or interchange part) acknowledged.
	Answers string `json:"answers"`
	Partner string `json:"partner"`
	X12     string `json:"x12"`
}

// effects returns the business effects of a processed 835 or 837 set. The
// payloads are written by the documents' hand-written encoders, byte for
// byte what json.Marshal writes for PaymentEvent and ClaimEvent (the
// effect hashes are taken over them; TestEffectsMatchEncodingJSON holds
// the two to it), with each document encoded once for payload and hash.
// With scratch set (Config.Transient), the payloads of 835 and 837 sets
// are written into *scratch, reused by the next call, instead of memory
// of their own.
func effects(ix *envelope.Interchange, s *Set, scratch *[]byte) []Effect {
	sender, receiver := ix.Sender(), ix.Receiver()
	switch {
	case s.Payment != nil:
		p := s.Payment
		// The payload is the envelope head, then the payment's own members:
		// the document is encoded once, in place, and hashed where it lies.
		var buf []byte
		if scratch != nil {
			buf = (*scratch)[:0]
		} else {
			size := 1024
			for i := range p.Claims {
				size += 400 + 350*len(p.Claims[i].Lines)
			}
			buf = make([]byte, 0, size)
		}
		buf = appendHead(buf, s.Key, s.ContentHash, true, sender, receiver)
		at := len(buf)
		buf = p.AppendJSON(buf)
		hash := paymentHash(buf[at:], p.ProductionDate)
		payload := joinHead(buf, at)
		if scratch != nil {
			*scratch = payload
		} else if cap(payload)-len(payload) > len(payload)/4 {
			payload = bytes.Clone(payload) // do not keep a poor estimate's slack
		}
		key := p.EffectKey()
		return []Effect{{Kind: KindPayment, Key: key, OrderingKey: key, Hash: hash, Payload: payload}}
	case s.Claims != nil:
		out := make([]Effect, 0, len(s.Claims))
		var buf, keys, arena []byte
		if scratch != nil {
			arena = (*scratch)[:0]
		}
		for i := range s.Claims {
			c := &s.Claims[i]
			buf = appendHead(buf[:0], s.Key, "", false, sender, receiver)
			at := len(buf)
			buf = c.AppendJSON(buf)
			hash := contentHash(buf[at:])
			// Both keys in one string.
			keys = claim.AppendEffectKey(keys[:0], sender, receiver, c, hash)
			n := len(keys)
			keys = claim.AppendOrderingKey(keys, sender, receiver, c)
			k := string(keys)
			payload := joinHead(buf, at)
			if scratch != nil {
				from := len(arena)
				arena = append(arena, payload...)
				payload = arena[from:len(arena):len(arena)]
			} else {
				payload = bytes.Clone(payload)
			}
			out = append(out, Effect{Kind: KindClaim, Key: k[:n], OrderingKey: k[n:], Hash: hash, Payload: payload})
		}
		if scratch != nil {
			*scratch = arena
		}
		return out
	case s.Acks != nil || s.Statuses != nil:
		out, _ := answerEffects(context.Background(), nil, ix, nil, s) // no lookup, no error
		return out
	}
	return nil
}

// appendHead appends the envelope members of a PaymentEvent (with its
// content hash) or a ClaimEvent (without), as json.Marshal writes them,
// without the closing brace: the document's members follow.
func appendHead(dst []byte, envelopeKey, contentHash string, withHash bool, sender, receiver string) []byte {
	dst = x12.AppendJSONString(append(dst, `{"envelope_key":`...), envelopeKey)
	if withHash {
		dst = x12.AppendJSONString(append(dst, `,"content_hash":`...), contentHash)
	}
	dst = x12.AppendJSONString(append(dst, `,"sender":`...), sender)
	return x12.AppendJSONString(append(dst, `,"receiver":`...), receiver)
}

// joinHead turns a head and the document encoded after it at buf[at:] into
// the one object json.Marshal writes for the event embedding the document:
// the document's opening brace becomes the comma after the head; an empty
// document leaves the head alone.
func joinHead(buf []byte, at int) []byte {
	if len(buf)-at <= 2 { // {}
		return append(buf[:at], '}')
	}
	buf[at] = ','
	return buf
}

// contentHash is the effect hash of a business document: SHA-256 over its
// canonical JSON, which holds what the set says (amounts, claims, dates,
// parties) and nothing of its envelope (keys, control numbers, content
// hash), so the same document regenerated under new control numbers
// hashes the same.
func contentHash(doc []byte) string {
	sum := sha256.Sum256(doc)
	var b [2 * sha256.Size]byte
	return string(hex.AppendEncode(b[:0], sum[:]))
}

// paymentHash is the effect hash of an encoded payment without its
// production date: DTM*405 dates the file, not the payment, so a
// remittance regenerated on another day is the same payment. The field is
// cut out of the encoding (the top-level "production_date" member comes
// before any nested object) rather than the payment encoded twice.
func paymentHash(doc []byte, productionDate string) string {
	if productionDate == "" {
		return contentHash(doc)
	}
	var mb [64]byte
	member := append(x12.AppendJSONString(append(mb[:0], `"production_date":`...), productionDate), ',')
	i := bytes.Index(doc, member)
	if i < 0 {
		panic("process: encoded payment lacks its production date") // the encoding is ours
	}
	h := sha256.New()
	h.Write(doc[:i])
	h.Write(doc[i+len(member):])
	var sum [sha256.Size]byte
	var b [2 * sha256.Size]byte
	return string(hex.AppendEncode(b[:0], h.Sum(sum[:0])))
}

// ackEffect returns an acknowledgment's effect. Its key carries the verdict
// (and, for a 999, the group's content), so its business content is its
// key: the hash is the key's.
func ackEffect(kind, key string, ix *envelope.Interchange, x []byte, answers string) Effect {
	return Effect{Kind: kind, Key: key, Hash: contentHash([]byte(key)), OrderingKey: "acks:" + ix.Sender(), Answers: answers + ":",
		Payload: mustJSON(AckEvent{Answers: answers, Partner: ix.Sender(), X12: string(x)})}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only encodable types are passed: a failure is a programming error.
		panic(fmt.Sprintf("process: encode effect: %v", err))
	}
	return b
}

// Repeated shares a string equal to the one before: the same type or
// implementation of set after set is kept once, in a string of its own
// (never a slice of a larger one).
type Repeated struct{ last string }

// Of returns s, or the equal string it returned last.
func (r *Repeated) Of(s string) string {
	if s != r.last {
		r.last = strings.Clone(s)
	}
	return r.last
}
