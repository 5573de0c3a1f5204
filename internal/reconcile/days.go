package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12"
)

// DayVersion names the format of the day rollups this build folds and
// reads. A rollup of another format is read live until it is folded again.
const DayVersion = 1

// Grace is how long after a UTC day ends its rows may still commit (a
// transaction begun before midnight, replicas whose clocks differ): a day
// is folded once Grace has passed since its end.
const Grace = time.Hour

const day = 24 * time.Hour

// A day's rollup is what its payments total to per payer (parsed and
// enqueued, counts and amounts) and the keys behind its divergences. Each
// business key counts where its first payment row was created; a key with
// no row that day and none before counts each day it was parsed (a
// missing effect parsed on two days is counted once when the days are
// read together, and not at all once a later document enqueued it).
// Delivery is not folded: a payment is delivered once no row of it is
// still to deliver, and those rows are few and indexed
// (store.Reconciler.UndeliveredPayments), so every reconciliation reads
// them as they are.

// stretch is what the payments of a stretch of time total to, per payer,
// with the summaries of its missing effects by key.
type stretch struct {
	payers  map[string]*Payer
	missing map[string]summary
}

func newStretch() *stretch {
	return &stretch{payers: map[string]*Payer{}, missing: map[string]summary{}}
}

func (st *stretch) payer(id string) *Payer {
	if st.payers[id] == nil {
		st.payers[id] = &Payer{PayerID: id}
	}
	return st.payers[id]
}

// parsed counts a parsed business key; missing when it has no payment row.
func (st *stretch) parsed(key string, s summary, missing bool) {
	py := st.payer(s.PayerID)
	py.Parsed++
	py.ParsedAmount = py.ParsedAmount.Add(s.Amount)
	if !s.Balanced {
		py.Unbalanced++
	}
	if missing {
		py.MissingEffects = append(py.MissingEffects, key)
		st.missing[key] = s
	}
}

// enqueued counts a payment enqueued; unknown when no parsed document of
// it was read. Its delivery is counted by undelivered.
func (st *stretch) enqueued(key string, p payload, unknown bool) {
	py := st.payer(p.PayerID)
	py.Enqueued++
	py.EnqueuedAmount = py.EnqueuedAmount.Add(p.Amount)
	if unknown {
		py.UnknownEffects = append(py.UnknownEffects, key)
	}
}

// merge adds o to st. A missing effect both hold (a key parsed on two
// days, enqueued on neither) is one payment: its second parse is taken
// back.
func (st *stretch) merge(o *stretch) {
	for id, p := range o.payers {
		t := st.payer(id)
		t.Parsed += p.Parsed
		t.ParsedAmount = t.ParsedAmount.Add(p.ParsedAmount)
		t.Enqueued += p.Enqueued
		t.EnqueuedAmount = t.EnqueuedAmount.Add(p.EnqueuedAmount)
		t.Unbalanced += p.Unbalanced
		t.UnknownEffects = append(t.UnknownEffects, p.UnknownEffects...)
		for _, key := range p.MissingEffects {
			if _, twice := st.missing[key]; !twice {
				t.MissingEffects = append(t.MissingEffects, key)
				st.missing[key] = o.missing[key]
				continue
			}
			s := o.missing[key]
			t.Parsed--
			t.ParsedAmount = t.ParsedAmount.Sub(s.Amount)
			if !s.Balanced {
				t.Unbalanced--
			}
		}
	}
}

// live matches the payments of [from, to) as the store holds them now.
func live(ctx context.Context, r store.Reconciler, from, to time.Time) (*stretch, error) {
	m := &matcher{st: newStretch()}
	if err := r.PaymentFacts(ctx, from, to, m.add); err != nil {
		return nil, err
	}
	m.flush()
	if err := m.resolve(ctx, r, from); err != nil {
		return nil, err
	}
	return m.st, nil
}

// enqueuedBefore returns which of keys have a payment row created before
// a time, asking the store a thousand keys at a time.
func enqueuedBefore(ctx context.Context, r store.Reconciler, keys []string, before time.Time) (map[string]bool, error) {
	out := map[string]bool{}
	for i := 0; i < len(keys); i += 1000 {
		found, err := r.PaymentsEnqueuedBefore(ctx, keys[i:min(i+1000, len(keys))], before)
		if err != nil {
			return nil, err
		}
		for k := range found {
			out[k] = true
		}
	}
	return out, nil
}

// payments totals per payer the payments of [since, now) and after (rows
// a clock ahead of now wrote): each closed day wholly inside with a
// rollup of this version from it, the rest live; then what of them is
// delivered.
func payments(ctx context.Context, r store.Reconciler, since, now time.Time) (map[string]*Payer, error) {
	first := store.DayStart(since)
	if first.Before(since) {
		first = first.Add(day)
	}
	var days []store.ReconcileDay
	if last := store.DayStart(now); first.Before(last) {
		var err error
		if days, err = r.ReconcileDays(ctx, first, last); err != nil {
			return nil, err
		}
	}
	total := newStretch()
	cursor, rolled := since, false
	for _, d := range days {
		st, err := decodeDay(d)
		if err != nil {
			continue // read live
		}
		if cursor.Before(d.Day) {
			lv, err := live(ctx, r, cursor, d.Day)
			if err != nil {
				return nil, err
			}
			total.merge(lv)
		}
		total.merge(st)
		cursor, rolled = d.Day.Add(day), true
	}
	lv, err := live(ctx, r, cursor, store.EndOfTime)
	if err != nil {
		return nil, err
	}
	total.merge(lv)
	if rolled {
		if err := total.enqueuedLater(ctx, r); err != nil {
			return nil, err
		}
	}
	if err := total.undelivered(ctx, r, since); err != nil {
		return nil, err
	}
	return total.payers, nil
}

// enqueuedLater takes back each missing effect that has a payment row
// now: one created after the stretch that missed it (a lost row that a
// regenerated document enqueued again), counted, with that document's
// parse, where it was created. Read in one stretch, such a key is one
// payment, enqueued.
func (st *stretch) enqueuedLater(ctx context.Context, r store.Reconciler) error {
	keys := make([]string, 0, len(st.missing))
	for k := range st.missing {
		keys = append(keys, k)
	}
	found, err := enqueuedBefore(ctx, r, keys, store.EndOfTime)
	if err != nil {
		return err
	}
	for k := range found {
		s := st.missing[k]
		py := st.payer(s.PayerID)
		py.Parsed--
		py.ParsedAmount = py.ParsedAmount.Sub(s.Amount)
		if !s.Balanced {
			py.Unbalanced--
		}
		py.MissingEffects = slices.DeleteFunc(py.MissingEffects, func(m string) bool { return m == k })
		delete(st.missing, k)
	}
	return nil
}

// undelivered counts as delivered every payment st enqueued but those
// with a row still to deliver: the rows created since since of payments
// with none before (the payments the window counts), once a payment.
func (st *stretch) undelivered(ctx context.Context, r store.Reconciler, since time.Time) error {
	for _, p := range st.payers {
		p.Delivered, p.DeliveredAmount = p.Enqueued, p.EnqueuedAmount
	}
	seen := map[string]bool{}
	return r.UndeliveredPayments(ctx, since, store.EndOfTime, func(pf store.PaymentFact) error {
		e := pf.Enqueued
		if e == nil || pf.Before || seen[pf.Key] {
			return nil
		}
		amount, ok := enqueuedAmount(e)
		if !ok {
			return nil // a row the matcher could not read either; the key's next may be read
		}
		seen[pf.Key] = true
		// A payment committed after the stretch that holds it was read
		// is here but not counted: its payer may be unknown, or have no
		// payment delivered to take it from. It is counted by the next
		// reconciliation.
		if py := st.payers[e.PayerID]; py != nil && py.Delivered > 0 {
			py.Delivered--
			py.DeliveredAmount = py.DeliveredAmount.Sub(amount)
		}
		return nil
	})
}

// dayBody is a rollup as the store holds it (store.ReconcileDay.Body).
type dayBody struct {
	Payers  []dayPayer `json:"payers"`
	Missing []dayKey   `json:"missing,omitempty"`
	Unknown []dayKey   `json:"unknown,omitempty"`
}

type dayPayer struct {
	PayerID        string    `json:"payer_id"`
	Parsed         int       `json:"parsed"`
	ParsedAmount   x12.Money `json:"parsed_amount"`
	Enqueued       int       `json:"enqueued"`
	EnqueuedAmount x12.Money `json:"enqueued_amount"`
	Unbalanced     int       `json:"unbalanced"`
}

// dayKey is a business key behind a divergence; a missing effect's with
// its summary's amount and balance, so that a second day's parse of it is
// taken back.
type dayKey struct {
	Key      string    `json:"key"`
	PayerID  string    `json:"payer_id"`
	Amount   x12.Money `json:"amount,omitzero"`
	Balanced bool      `json:"balanced,omitempty"`
}

// encode returns st as a rollup's body. Delivery is not in it.
func (st *stretch) encode() ([]byte, error) {
	var b dayBody
	for _, p := range st.payers {
		b.Payers = append(b.Payers, dayPayer{PayerID: p.PayerID, Parsed: p.Parsed, ParsedAmount: p.ParsedAmount,
			Enqueued: p.Enqueued, EnqueuedAmount: p.EnqueuedAmount, Unbalanced: p.Unbalanced})
		for _, k := range p.UnknownEffects {
			b.Unknown = append(b.Unknown, dayKey{Key: k, PayerID: p.PayerID})
		}
	}
	for k, s := range st.missing {
		b.Missing = append(b.Missing, dayKey{Key: k, PayerID: s.PayerID, Amount: s.Amount, Balanced: s.Balanced})
	}
	sort.Slice(b.Payers, func(i, j int) bool { return b.Payers[i].PayerID < b.Payers[j].PayerID })
	sort.Slice(b.Missing, func(i, j int) bool { return b.Missing[i].Key < b.Missing[j].Key })
	sort.Slice(b.Unknown, func(i, j int) bool { return b.Unknown[i].Key < b.Unknown[j].Key })
	return json.Marshal(b)
}

// decodeDay reads a rollup of this version as a stretch.
func decodeDay(d store.ReconcileDay) (*stretch, error) {
	if d.Version != DayVersion {
		return nil, fmt.Errorf("reconcile: rollup of %s has version %d, not %d", d.Day.Format(time.DateOnly), d.Version, DayVersion)
	}
	var b dayBody
	if err := json.Unmarshal(d.Body, &b); err != nil {
		return nil, fmt.Errorf("reconcile: rollup of %s: %w", d.Day.Format(time.DateOnly), err)
	}
	st := newStretch()
	for _, p := range b.Payers {
		py := st.payer(p.PayerID)
		py.Parsed, py.ParsedAmount, py.Unbalanced = p.Parsed, p.ParsedAmount, p.Unbalanced
		py.Enqueued, py.EnqueuedAmount = p.Enqueued, p.EnqueuedAmount
	}
	for _, k := range b.Missing {
		py := st.payer(k.PayerID)
		py.MissingEffects = append(py.MissingEffects, k.Key)
		st.missing[k.Key] = summary{PayerID: k.PayerID, Amount: k.Amount, Balanced: k.Balanced}
	}
	for _, k := range b.Unknown {
		py := st.payer(k.PayerID)
		py.UnknownEffects = append(py.UnknownEffects, k.Key)
	}
	return st, nil
}

// FromRows returns r without its day rollups: a reconciliation through it
// reads every row of its window.
func FromRows(r store.Reconciler) store.Reconciler { return fromRows{r} }

type fromRows struct{ store.Reconciler }

func (fromRows) ReconcileDays(context.Context, time.Time, time.Time) ([]store.ReconcileDay, error) {
	return nil, nil
}

// Settle is how long after a day's end its rollup is folded again at
// every pass: rows that commit into a day after its first fold (a
// poller's clock behind the folding replica's, an ingest longer than
// Grace) are counted once they are this close to it.
const Settle = 48 * time.Hour

// Fold folds the UTC day that starts at day, at the time at: matches its
// payments as they are now and stores the rollup, replacing one stored.
func Fold(ctx context.Context, r store.Reconciler, day, at time.Time) error {
	day = store.DayStart(day)
	st, err := live(ctx, r, day, day.Add(24*time.Hour))
	if err != nil {
		return fmt.Errorf("reconcile: fold %s: %w", day.Format(time.DateOnly), err)
	}
	body, err := st.encode()
	if err != nil {
		return err
	}
	return r.PutReconcileDay(ctx, store.ReconcileDay{Day: day, Version: DayVersion, Body: body, FoldedAt: at})
}

// FoldClosed folds, newest first and at most max, the UTC days within
// keep of now that have closed (ended Grace ago) and have no rollup of
// this version folded Settle after their end (none, one of an older
// format, or one folded sooner), and returns how many it folded; a day
// that fails is left for the next pass after the others are tried. The
// first day of the window is left out: retention may have pruned part of
// it. A rollup of a later format (a newer replica's) is left as it is.
func FoldClosed(ctx context.Context, r store.Reconciler, now time.Time, keep time.Duration, max int) (int, error) {
	first := store.DayStart(now.Add(-keep)).Add(day)
	end := store.DayStart(now.Add(-Grace)) // the first day not closed
	if !first.Before(end) {
		return 0, nil
	}
	have, err := r.ReconcileDays(ctx, first, end)
	if err != nil {
		return 0, err
	}
	settled := map[time.Time]bool{}
	for _, d := range have {
		settled[d.Day] = d.Version > DayVersion ||
			d.Version == DayVersion && !d.FoldedAt.Before(d.Day.Add(day+Settle))
	}
	n := 0
	var errs []error
	for d := end.Add(-day); !d.Before(first) && n < max; d = d.Add(-day) {
		if settled[d] {
			continue
		}
		if err := Fold(ctx, r, d, now); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
