package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/x12/claim"
	"github.com/ediwatch/ediwatch/internal/x12/remit"
)

// wantsDocument reports whether a set of type typ shows a document: 835
// and 837 sets do.
func wantsDocument(typ string) bool { return typ == "835" || typ == "837" }

// docEncoder encodes the document `inspect --json` shows of a set: its
// summary, or with --show-phi the whole document. Not safe for concurrent
// use; each worker has its own.
type docEncoder struct {
	showPHI bool
	buf     bytes.Buffer
	enc     *json.Encoder
}

func newDocEncoder(showPHI bool) *docEncoder {
	d := &docEncoder{showPHI: showPHI}
	d.enc = json.NewEncoder(&d.buf)
	d.enc.SetEscapeHTML(false)
	return d
}

// appendDoc appends the JSON of the document of the set of type typ made of
// segs, and reports whether it has one.
func (d *docEncoder) appendDoc(dst []byte, typ string, segs []envelope.Segment) ([]byte, bool, error) {
	var ps process.Set
	switch typ {
	case "835":
		ps.Payment, _ = remit.Parse(segs)
	case "837":
		ps.Claims, _ = claim.Parse(segs)
	}
	var doc any
	switch {
	case d.showPHI && ps.Payment != nil:
		doc = ps.Payment
	case d.showPHI && ps.Claims != nil:
		doc = ps.Claims
	default:
		doc = ps.Summary()
	}
	if doc == nil {
		return dst, false, nil
	}
	d.buf.Reset()
	if err := d.enc.Encode(doc); err != nil {
		return dst, false, fmt.Errorf("encode document: %w", err)
	}
	return append(dst, bytes.TrimSuffix(d.buf.Bytes(), []byte{'\n'})...), true, nil
}

// jsonOut writes the JSON report of one file in file order. Envelope parts
// are appended to buf(); sets go through set, whose documents are parsed
// inline or, with workers, on a pool while the file is read on.
type jsonOut struct {
	w   *bufio.Writer
	cur *outChunk
	enc *docEncoder // inline parsing

	// the pool, nil without workers
	jobs    chan *outChunk
	chunks  chan *outChunk
	werr    chan error
	queue   []*outChunk // submitted, oldest first
	inQueue int         // their bytes
	spare   []*outChunk
}

// outChunk is output in file order: bytes, then perhaps a set's document
// still to parse and the end of the set.
type outChunk struct {
	pre   []byte
	parse bool
	typ   string
	raw   []byte
	segs  []envelope.Segment
	doc   []byte
	has   bool
	err   error
	done  chan struct{} // closed when parsed
	wrote chan struct{} // closed when written
}

const (
	chunkFlush   = 64 << 10 // envelope bytes gathered before they are written
	poolMaxBytes = 8 << 20  // bytes in flight in the pool
	poolMaxSets  = 64       // chunks in flight in the pool
)

func newJSONOut(w *bufio.Writer, showPHI bool, workers int) *jsonOut {
	o := &jsonOut{w: w, cur: &outChunk{}}
	if workers <= 0 {
		o.enc = newDocEncoder(showPHI)
		return o
	}
	o.jobs = make(chan *outChunk, poolMaxSets)
	o.chunks = make(chan *outChunk, poolMaxSets)
	o.werr = make(chan error, 1)
	for range workers {
		go func(enc *docEncoder) {
			for c := range o.jobs {
				c.doc, c.has, c.err = enc.appendDoc(c.doc[:0], c.typ, c.segs)
				close(c.done)
			}
		}(newDocEncoder(showPHI))
	}
	go o.write()
	return o
}

// write is the pool's writer: it prints chunks in order, each once its
// document is parsed.
func (o *jsonOut) write() {
	var err error
	for c := range o.chunks {
		if err == nil {
			_, err = o.w.Write(c.pre)
		}
		if c.parse {
			<-c.done
			if err == nil {
				err = c.err
			}
			if err == nil {
				err = writeDocTail(o.w, c.doc, c.has)
			}
		}
		close(c.wrote)
	}
	o.werr <- err
}

func writeDocTail(w *bufio.Writer, doc []byte, has bool) error {
	if has {
		w.WriteString(`,"document":`)
		w.Write(doc)
	}
	return w.WriteByte('}')
}

// buf returns the buffer envelope JSON is appended to.
func (o *jsonOut) buf() *[]byte { return &o.cur.pre }

// set writes the set just read and its document.
func (o *jsonOut) set(s *envelope.Set) error {
	c := o.cur
	c.pre = envelope.AppendSetOpen(c.pre, s)
	if !wantsDocument(s.Type) {
		c.pre = append(c.pre, '}')
		return o.maybeFlush()
	}
	if o.jobs == nil {
		var has bool
		var err error
		c.doc, has, err = o.enc.appendDoc(c.doc[:0], s.Type, s.Segments())
		if err != nil {
			return err
		}
		if has {
			c.pre = append(append(c.pre, `,"document":`...), c.doc...)
		}
		c.pre = append(c.pre, '}')
		return o.maybeFlush()
	}
	// The pool parses a copy: the Reader reuses the segments' memory.
	c.parse, c.typ = true, s.Type
	c.raw, c.segs = c.raw[:0], c.segs[:0]
	for _, seg := range s.Segments() {
		c.raw = append(c.raw, seg.Raw()...)
	}
	at := 0
	for _, seg := range s.Segments() {
		n := len(seg.Raw())
		cp := envelope.NewSegment(c.raw[at:at+n:at+n], seg.Delimiters())
		cp.Offset, cp.Index = seg.Offset, seg.Index
		c.segs = append(c.segs, cp)
		at += n
	}
	return o.submit()
}

func (o *jsonOut) maybeFlush() error {
	if len(o.cur.pre) < chunkFlush {
		return nil
	}
	if o.jobs == nil {
		_, err := o.w.Write(o.cur.pre)
		o.cur.pre = o.cur.pre[:0]
		return err
	}
	return o.submit()
}

// submit hands the current chunk to the pool, first waiting for the oldest
// chunks to be written while the pool holds too much.
func (o *jsonOut) submit() error {
	c := o.cur
	size := len(c.pre) + len(c.raw)
	for len(o.queue) > 0 && (len(o.queue) >= poolMaxSets || o.inQueue+size > poolMaxBytes) {
		old := o.queue[0]
		<-old.wrote
		o.queue = o.queue[1:]
		o.inQueue -= len(old.pre) + len(old.raw)
		o.spare = append(o.spare, old)
	}
	c.wrote = make(chan struct{})
	if c.parse {
		c.done = make(chan struct{})
		o.jobs <- c
	}
	o.chunks <- c
	o.queue = append(o.queue, c)
	o.inQueue += size
	if n := len(o.spare); n > 0 {
		o.cur = o.spare[n-1]
		o.spare = o.spare[:n-1]
		o.cur.pre, o.cur.parse, o.cur.raw = o.cur.pre[:0], false, o.cur.raw[:0]
	} else {
		o.cur = &outChunk{}
	}
	return nil
}

// close writes what is left and stops the pool; the report's own members
// can then be written to o.w.
func (o *jsonOut) close() error {
	if o.jobs == nil {
		_, err := o.w.Write(o.cur.pre)
		o.cur.pre = o.cur.pre[:0]
		return err
	}
	if len(o.cur.pre) > 0 {
		o.submit()
	}
	close(o.jobs)
	close(o.chunks)
	return <-o.werr
}
