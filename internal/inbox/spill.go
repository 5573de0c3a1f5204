package inbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ediwatch/ediwatch/internal/outbox"
)

// DefaultPipeFrom is Options.PipeFrom when not set: a typical file is
// parsed whole before its write begins.
const DefaultPipeFrom = 4 << 20

// spill holds the records of one file between the phases: in memory, up
// to limit bytes; past them, overflow pipes them to a write begun
// meanwhile (ingest's pipeline). Records are written in a compact encoding
// of their own (spill.put): every field as a length-prefixed string,
// without the reflection gob spent on each.
type spill struct {
	limit int
	n     int // records
	mem   bytes.Buffer
	w     *bufio.Writer // piped: to the pipe
	buf   []byte        // the record being encoded
	pack  []byte        // a payload being packed
	// overflow is called once, when the records outgrow limit, with the
	// records so far: the io.Writer it returns (a pipe to a write begun
	// meanwhile) takes every later record.
	overflow func(mem []byte) (io.Writer, error)
	// early: overflow is called at the first record, whatever limit.
	early bool
	piped bool
}

// spilled is one record of the spill: a set or an acknowledgment (or,
// piped, a control number request: the sender it is for and how many).
type spilled struct {
	Set       *SetRecord
	Ack       *outbox.Effect
	NumberFor string
	Numbers   int64
}

// Record tags and set flags of the encoding.
const (
	tagSet = 'S'
	tagAck = 'A'
	// tagNumber asks the write at the other end of a pipe for a control
	// number (ingest's pipedNumbers); never in a spill read twice.
	tagNumber = 'N'

	flagRejected = 1 << 0
	flagClaimed  = 1 << 1
	flagClean    = 1 << 2
)

// put appends rec to the spill.
func (s *spill) put(rec spilled) error {
	b := s.buf[:0]
	switch {
	case rec.Set != nil:
		r := rec.Set
		b = append(b, tagSet)
		b = appendStr(b, r.Key)
		b = appendStr(b, r.ContentHash)
		b = appendStr(b, r.Type)
		var flags byte
		if r.Rejected {
			flags |= flagRejected
		}
		if r.Claimed {
			flags |= flagClaimed
		}
		if r.Clean {
			flags |= flagClean
		}
		b = append(b, flags)
		b = appendStr(b, r.Reason)
		b = appendStr(b, []byte(r.Summary))
		b = binary.AppendUvarint(b, uint64(len(r.Effects)))
		for _, e := range r.Effects {
			b = s.appendEffect(b, e)
		}
	case rec.Ack != nil:
		b = append(b, tagAck)
		b = s.appendEffect(b, *rec.Ack)
	default:
		return errors.New("ingest: spill: empty record")
	}
	s.buf = b
	if _, err := s.Write(b); err != nil {
		return fmt.Errorf("ingest: spill: %w", err)
	}
	s.n++
	return nil
}

func appendStr[S string | []byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendEffect appends e, its payload packed (packed in the spill's own
// buffer, reused from payload to payload: a large file's would otherwise
// allocate a worst-case buffer each).
func (s *spill) appendEffect(b []byte, e outbox.Effect) []byte {
	b = appendStr(b, e.Kind)
	b = appendStr(b, e.Key)
	b = appendStr(b, e.OrderingKey)
	b = appendStr(b, e.Sink)
	packed := e.Packed
	if packed == nil {
		s.pack = outbox.AppendPackedPayload(s.pack[:0], e.Payload)
		packed = s.pack
	}
	b = appendStr(b, packed)
	b = appendStr(b, e.Hash)
	return appendStr(b, e.UnlessConflictIn)
}

// putNumberRequest appends a request for up to n of sender's next control
// numbers to a piped spill and flushes it to the write, which answers
// once it has written every record before it.
func (s *spill) putNumberRequest(sender string, n int64) error {
	if !s.piped {
		return errors.New("ingest: spill: a control number asked of a spill not piped")
	}
	b := binary.AppendUvarint(appendStr(append(s.buf[:0], tagNumber), sender), uint64(n))
	s.buf = b
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.w.Flush()
}

// flush writes what a piped spill buffers to its pipe.
func (s *spill) flush() error {
	if !s.piped {
		return nil
	}
	return s.w.Flush()
}

// Write appends encoded records: to memory, then, past s.limit (or from
// the first, early), to the pipe s.overflow returns.
func (s *spill) Write(b []byte) (int, error) {
	if !s.piped && (s.early || s.mem.Len()+len(b) > s.limit) && s.overflow != nil {
		w, err := s.overflow(s.mem.Bytes())
		if err != nil {
			return 0, err
		}
		// s.mem's bytes are the write's to read now, and to let go of once
		// read. A buffer no larger than the limit: with a small one (the
		// suite's PipeFrom 1), the records reach the write as they are
		// put, so the write does run while the file is parsed.
		s.piped, s.w, s.mem = true, bufio.NewWriterSize(w, min(256<<10, s.limit)), bytes.Buffer{}
	}
	if s.piped {
		return s.w.Write(b)
	}
	return s.mem.Write(b)
}

// reader returns the records from the start; it may be called again, for
// another write of the same records (not of a piped spill).
func (s *spill) reader() (*spillReader, error) {
	if s.piped {
		return nil, errors.New("ingest: spill: piped records cannot be read again")
	}
	return &spillReader{r: bufio.NewReader(bytes.NewReader(s.mem.Bytes()))}, nil
}

// spillReader decodes the records put in a spill, in order.
type spillReader struct {
	r       *bufio.Reader
	scratch []byte
	err     error
}

// next returns the next record; io.EOF, unwrapped, where the records end
// (between two of them).
func (d *spillReader) next() (spilled, error) {
	tag, err := d.r.ReadByte()
	if err == io.EOF {
		return spilled{}, io.EOF
	}
	if err != nil {
		return spilled{}, fmt.Errorf("ingest: read spill: %w", err)
	}
	var rec spilled
	switch tag {
	case tagSet:
		r := &SetRecord{Key: d.str(), ContentHash: d.str(), Type: d.str()}
		flags := d.byte()
		r.Rejected, r.Claimed, r.Clean = flags&flagRejected != 0, flags&flagClaimed != 0, flags&flagClean != 0
		r.Reason = d.str()
		r.Summary = d.bytes()
		if n := d.uvarint(); n > 0 && d.err == nil {
			r.Effects = make([]outbox.Effect, 0, min(n, 1024))
			for range n {
				r.Effects = append(r.Effects, d.effect())
				if d.err != nil {
					break
				}
			}
		}
		rec.Set = r
	case tagAck:
		e := d.effect()
		rec.Ack = &e
	case tagNumber:
		rec.NumberFor = d.str()
		rec.Numbers = int64(d.uvarint())
		if (rec.NumberFor == "" || rec.Numbers < 1) && d.err == nil {
			d.err = errors.New("control numbers asked for no sender or none")
		}
	default:
		return spilled{}, fmt.Errorf("ingest: read spill: unknown record tag %q", tag)
	}
	if d.err == io.EOF {
		d.err = io.ErrUnexpectedEOF // inside a record
	}
	if d.err != nil {
		return spilled{}, fmt.Errorf("ingest: read spill: %w", d.err)
	}
	return rec, nil
}

func (d *spillReader) effect() outbox.Effect {
	return outbox.Effect{Kind: d.str(), Key: d.str(), OrderingKey: d.str(), Sink: d.str(), Packed: d.bytes(),
		Hash: d.str(), UnlessConflictIn: d.str()}
}

func (d *spillReader) byte() byte {
	if d.err != nil {
		return 0
	}
	c, err := d.r.ReadByte()
	d.err = err
	return c
}

func (d *spillReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	n, err := binary.ReadUvarint(d.r)
	d.err = err
	return n
}

// str reads a string.
func (d *spillReader) str() string {
	n := d.uvarint()
	if d.err != nil || n == 0 {
		return ""
	}
	if uint64(cap(d.scratch)) < n {
		d.scratch = make([]byte, n)
	}
	b := d.scratch[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = err
		return ""
	}
	return string(b)
}

// bytes reads a byte string into a slice of its own; empty is nil.
func (d *spillReader) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n == 0 {
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = err
		return nil
	}
	return b
}
