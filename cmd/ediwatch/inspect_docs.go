package main

import (
	"bufio"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/x12"
	"github.com/ediwatch/ediwatch/internal/x12/claim"
	"github.com/ediwatch/ediwatch/internal/x12/remit"
)

// wantsDocument reports whether a set of type typ shows a document: 835
// and 837 sets do.
func wantsDocument(typ string) bool { return typ == "835" || typ == "837" }

// docEncoder encodes the document `inspect --json` shows of a set: its
// summary, or with --show-phi the whole document, with the documents'
// hand-written encoders and HTML escaping undone (inspect prints what
// encoding/json prints with SetEscapeHTML(false)). Each worker has its
// own: its parsers reuse their memory from set to set, as each document
// is encoded before the next set is parsed.
type docEncoder struct {
	showPHI bool
	remit   remit.Parser
	claim   claim.Parser
	segs    []envelope.Segment // a pending set's segments, rebuilt
}

func newDocEncoder(showPHI bool) *docEncoder { return &docEncoder{showPHI: showPHI} }

// appendDoc appends the JSON of the document of the set of type typ made of
// segs, and reports whether it has one.
func (d *docEncoder) appendDoc(dst []byte, typ string, segs []envelope.Segment) ([]byte, bool, error) {
	from := len(dst)
	if !d.showPHI {
		// The summary alone: read only the segments that decide it.
		switch typ {
		case "835":
			sum := d.remit.Summary(segs)
			return envelope.UnescapeHTML(sum.AppendJSON(dst), from), true, nil
		case "837":
			sum, has := d.claim.Summary(segs)
			if !has {
				return dst, false, nil
			}
			return envelope.UnescapeHTML(sum.AppendJSON(dst), from), true, nil
		}
	}
	var ps process.Set
	switch typ {
	case "835":
		ps.Payment, _ = d.remit.Parse(segs)
	case "837":
		ps.Claims, _ = d.claim.Parse(segs)
	}
	var has bool
	switch {
	case d.showPHI && ps.Payment != nil:
		dst, has = ps.Payment.AppendJSON(dst), true
	case d.showPHI && ps.Claims != nil:
		dst, has = x12.AppendJSONArray(dst, ps.Claims, (*claim.Claim).AppendJSON), true
	default:
		dst, has = ps.AppendSummaryJSON(dst)
	}
	return envelope.UnescapeHTML(dst, from), has, nil
}

// jsonOut writes the JSON report of one file in file order. Envelope parts
// are appended to buf(); sets go through set, whose documents are parsed
// inline or, with workers, on a pool while the file is read on. The pool
// takes sets by the batch: handing over one set at a time costs more in
// goroutine wake-ups than parsing it.
type jsonOut struct {
	w       *bufio.Writer
	cur     *outBatch
	enc     *docEncoder // inline parsing
	started bool        // part of the report was written or handed over

	// the pool, nil without workers
	jobs    chan *outBatch
	batches chan *outBatch
	werr    chan error
	queue   []*outBatch // submitted, oldest first
	inQueue int         // their bytes
	maxJobs int         // batches in flight
	spare   []*outBatch
}

// outBatch is output in file order: envelope JSON, in which sets wait for
// their documents.
type outBatch struct {
	out   []byte
	sets  []pendingSet
	raw   []byte // the pending sets' segments, copied back to back
	ends  []int  // where each segment ends in raw
	final []byte // out with the documents, once rendered
	err   error
	done  chan struct{} // closed when rendered
	wrote chan struct{} // closed when written
}

// pendingSet is a set whose JSON in out ends at at, before its document
// and closing brace; its segments end at ends[seg0:seg1].
type pendingSet struct {
	at         int
	typ        string
	d          envelope.Delimiters
	seg0, seg1 int
}

func (b *outBatch) size() int { return len(b.out) + len(b.raw) }

// segments appends the segments of the pending set p, made of the copied
// bytes, to dst. (The documents need neither their offsets nor their
// indexes in the file.)
func (b *outBatch) segments(dst []envelope.Segment, p pendingSet) []envelope.Segment {
	start := 0
	if p.seg0 > 0 {
		start = b.ends[p.seg0-1]
	}
	for _, end := range b.ends[p.seg0:p.seg1] {
		dst = append(dst, envelope.NewSegment(b.raw[start:end:end], p.d))
		start = end
	}
	return dst
}

// render parses the pending sets' documents and builds final.
func (b *outBatch) render(enc *docEncoder) {
	b.final = b.final[:0]
	prev := 0
	for _, p := range b.sets {
		b.final = append(b.final, b.out[prev:p.at]...)
		prev = p.at
		mark := len(b.final)
		b.final = append(b.final, `,"document":`...)
		var has bool
		enc.segs = b.segments(enc.segs[:0], p)
		b.final, has, b.err = enc.appendDoc(b.final, p.typ, enc.segs)
		if b.err != nil {
			return
		}
		if !has {
			b.final = b.final[:mark]
		}
		b.final = append(b.final, '}')
	}
	b.final = append(b.final, b.out[prev:]...)
}

const (
	batchBytes   = 64 << 10 // a batch is handed over once it holds this much
	poolMaxBytes = 4 << 20  // bytes in flight in the pool
)

func newJSONOut(w *bufio.Writer, showPHI bool, workers int) *jsonOut {
	o := &jsonOut{w: w, cur: &outBatch{}}
	if workers <= 0 {
		o.enc = newDocEncoder(showPHI)
		return o
	}
	o.maxJobs = 2*workers + 2
	o.jobs = make(chan *outBatch, o.maxJobs)
	o.batches = make(chan *outBatch, o.maxJobs)
	o.werr = make(chan error, 1)
	for range workers {
		go func(enc *docEncoder) {
			for b := range o.jobs {
				b.render(enc)
				close(b.done)
			}
		}(newDocEncoder(showPHI))
	}
	go o.write()
	return o
}

// write is the pool's writer: it prints batches in order, each once
// rendered.
func (o *jsonOut) write() {
	var err error
	for b := range o.batches {
		data := b.out
		if b.done != nil {
			<-b.done
			data = b.final
			if err == nil {
				err = b.err
			}
		}
		if err == nil {
			_, err = o.w.Write(data)
		}
		close(b.wrote)
	}
	o.werr <- err
}

// buf returns the buffer envelope JSON is appended to.
func (o *jsonOut) buf() *[]byte { return &o.cur.out }

// set writes the set just read and its document.
func (o *jsonOut) set(s *envelope.Set) error {
	b := o.cur
	b.out = envelope.AppendSetOpen(b.out, s)
	switch {
	case !wantsDocument(s.Type):
		b.out = append(b.out, '}')
	case o.jobs == nil:
		mark := len(b.out)
		b.out = append(b.out, `,"document":`...)
		var has bool
		var err error
		b.out, has, err = o.enc.appendDoc(b.out, s.Type, s.Segments())
		if err != nil {
			return err
		}
		if !has {
			b.out = b.out[:mark]
		}
		b.out = append(b.out, '}')
	default:
		// The pool parses a copy: the Reader reuses the segments' memory.
		// Only the bytes are copied here, the reading goroutine's work;
		// the worker makes segments of them.
		segs := s.Segments()
		p := pendingSet{at: len(b.out), typ: s.Type, seg0: len(b.ends)}
		if len(segs) > 0 {
			p.d = segs[0].Delimiters()
		}
		for i := range segs {
			b.raw = append(b.raw, segs[i].Raw()...)
			b.ends = append(b.ends, len(b.raw))
		}
		p.seg1 = len(b.ends)
		b.sets = append(b.sets, p)
	}
	return o.flushFull()
}

// flushFull flushes the current batch once it holds batchBytes. Sets and
// the ends of groups and interchanges call it: a file of interchanges or
// groups without sets is written as it is read too, not held whole.
func (o *jsonOut) flushFull() error {
	if o.cur.size() < batchBytes {
		return nil
	}
	return o.flush()
}

// flush writes the current batch, or hands it to the pool.
func (o *jsonOut) flush() error {
	b := o.cur
	o.started = true
	if o.jobs == nil {
		_, err := o.w.Write(b.out)
		b.out = b.out[:0]
		return err
	}
	for len(o.queue) > 0 && (len(o.queue) >= o.maxJobs || o.inQueue+b.size() > poolMaxBytes) {
		old := o.queue[0]
		<-old.wrote
		o.queue = o.queue[1:]
		o.inQueue -= old.size()
		o.spare = append(o.spare, old)
	}
	b.wrote, b.done = make(chan struct{}), nil
	if len(b.sets) > 0 {
		b.done = make(chan struct{})
		o.jobs <- b
	}
	o.batches <- b
	o.queue = append(o.queue, b)
	o.inQueue += b.size()
	if n := len(o.spare); n > 0 {
		o.cur = o.spare[n-1]
		o.spare = o.spare[:n-1]
		c := o.cur
		c.out, c.sets, c.raw, c.ends, c.err = c.out[:0], c.sets[:0], c.raw[:0], c.ends[:0], nil
	} else {
		o.cur = &outBatch{}
	}
	return nil
}

// close writes what is left and stops the pool; the report's own members
// can then be written to o.w.
func (o *jsonOut) close() error {
	if o.jobs == nil {
		return o.flush()
	}
	if o.cur.size() > 0 {
		o.flush()
	}
	return o.stop()
}

func (o *jsonOut) stop() error {
	close(o.jobs)
	close(o.batches)
	return <-o.werr
}

// abort stops the pool, dropping what was not handed to the writer yet, and
// reports whether any of the report reached o.w.
func (o *jsonOut) abort() (started bool) {
	o.cur.out = o.cur.out[:0]
	if o.jobs != nil {
		o.stop()
	}
	return o.started
}
