// Package ingest records one X12 file in the store: it processes the file
// (internal/process) and feeds every set and acknowledgment into one store
// ingestion, committed with the file's ledger row in one transaction. The
// poller and `ediwatch ingest` share it.
package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
)

// Options is what an ingest needs besides the file.
type Options struct {
	Store store.Ingester
	// Routes maps an effect kind to the sink that delivers it.
	Routes map[string]string
	// Ack shapes acknowledgments (our ids, per source).
	Ack ack.Options
}

// SetResult is one set's outcome with what processing found.
type SetResult struct {
	store.SetResult
	Type   string
	Reason string
	// Unbalanced is true for an 835 whose amounts do not balance.
	Unbalanced bool
}

// Result is the outcome of one file.
type Result struct {
	X12     bool
	Sets    []SetResult
	AckKeys []string
}

// Count returns how many sets had the outcome.
func (r *Result) Count(o store.Outcome) int {
	n := 0
	for _, s := range r.Sets {
		if s.Outcome == o {
			n++
		}
	}
	return n
}

// File records the file r, described by f, in one transaction. On error
// nothing is recorded.
func File(ctx context.Context, opts Options, f store.FileInfo, r io.ReadSeeker) (*Result, error) {
	ing, err := opts.Store.BeginIngest(ctx, f)
	if err != nil {
		return nil, err
	}
	defer ing.Rollback()
	cn := ControlNumbers{Store: ing}
	var meta []SetResult
	summary, err := process.File(ctx, r, process.Config{ControlNumbers: cn, Ack: opts.Ack},
		func(it process.Item) error {
			switch {
			case it.Set != nil:
				rec, err := setRecord(it.Set, opts.Routes)
				if err != nil {
					return err
				}
				meta = append(meta, SetResult{Type: it.Set.Type, Reason: it.Set.Reason,
					Unbalanced: it.Set.Payment != nil && !it.Set.Payment.Balance.Balanced})
				return ing.AddSet(ctx, rec)
			case it.Ack != nil:
				e, err := effect(*it.Ack, opts.Routes)
				if err != nil {
					return err
				}
				// Quarantined content is not acknowledged as accepted.
				e.UnlessConflictIn = it.Ack.Answers
				return ing.AddAck(ctx, e)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	status := store.FileIngested
	reason := ""
	if !summary.X12 {
		// Not X12: the file itself is keyed by its SHA-256 and rejected,
		// with a TA1 when the partner's ids are configured.
		status, reason = store.FileRejected, summary.Errors[0].Error()
		meta = append(meta, SetResult{Type: "", Reason: reason})
		if err := ing.AddSet(ctx, store.SetRecord{Key: summary.Key, ContentHash: summary.Key, Type: "",
			Rejected: true, Reason: reason}); err != nil {
			return nil, err
		}
		if x, err := ack.BuildTA1Unreadable(ctx, opts.Ack.Us, opts.Ack.Them, cn, opts.Ack); err == nil {
			e, err := effect(process.Effect{Kind: process.KindAckTA1, Key: "ta1:" + summary.Key,
				OrderingKey: "acks:" + opts.Ack.Them.Qualifier + ":" + opts.Ack.Them.ID,
				Payload: mustJSON(process.AckEvent{Answers: summary.Key,
					Partner: opts.Ack.Them.Qualifier + ":" + opts.Ack.Them.ID, X12: string(x)})}, opts.Routes)
			if err != nil {
				return nil, err
			}
			if err := ing.AddAck(ctx, e); err != nil {
				return nil, err
			}
		}
	}
	res, err := ing.Commit(ctx, status, reason)
	if err != nil {
		return nil, err
	}
	if len(res.Sets) != len(meta) {
		return nil, fmt.Errorf("ingest: %d results for %d sets", len(res.Sets), len(meta))
	}
	out := &Result{X12: summary.X12, AckKeys: res.AckKeys}
	for i, s := range res.Sets {
		m := meta[i]
		m.SetResult = s
		out.Sets = append(out.Sets, m)
	}
	return out, nil
}

func setRecord(s *process.Set, routes map[string]string) (store.SetRecord, error) {
	rec := store.SetRecord{Key: s.Key, ContentHash: s.ContentHash, Type: s.Type,
		Rejected: s.Status == process.Rejected, Reason: s.Reason}
	if sum := s.Summary(); sum != nil {
		rec.Summary = mustJSON(sum)
	}
	for _, e := range s.Effects {
		se, err := effect(e, routes)
		if err != nil {
			return rec, err
		}
		rec.Effects = append(rec.Effects, se)
	}
	return rec, nil
}

func effect(e process.Effect, routes map[string]string) (store.Effect, error) {
	sink, ok := routes[e.Kind]
	if !ok {
		return store.Effect{}, fmt.Errorf("ingest: no route for effect kind %s", e.Kind)
	}
	return store.Effect{Kind: e.Kind, Key: e.Key, OrderingKey: e.OrderingKey, Sink: sink, Payload: e.Payload,
		Hash: e.Hash}, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ingest: encode: %v", err))
	}
	return b
}

// ControlNumbers adapts a store to ack.ControlNumbers.
type ControlNumbers struct {
	Store interface {
		NextControlNumber(ctx context.Context, sender string) (int64, error)
	}
}

// Next implements ack.ControlNumbers.
func (c ControlNumbers) Next(ctx context.Context, sender string) (int64, error) {
	return c.Store.NextControlNumber(ctx, sender)
}
