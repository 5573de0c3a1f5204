package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"runtime"
	"strconv"

	"github.com/ediwatch/ediwatch/internal/envelope"
)

// `inspect` reads each file once: a goroutine reads ahead and hashes the
// bytes the envelope Reader then takes, and the report is written as the
// file is read. With
// --json, the interchanges are printed as they complete; the members known
// only at the end (valid, errors, keys, sha256, size) follow them, the
// errors and keys having waited in a spill (memory, then an unlinked
// temporary file). The text form begins with the file's verdict and hash,
// so its table and errors wait in spills and are printed at the end.
// Memory is bounded by the largest transaction set, whatever the size of
// the file.

type inspectOptions struct {
	json, showPHI bool
	// workers parse 835 and 837 documents beside the reading; 0 parses
	// them inline.
	workers int
	// spillLimit is the bytes a spill keeps in memory; 0 means spillLimit.
	spillLimit int
}

// inspectWorkers is the size of the document pool: the cores besides the
// one reading the file.
func inspectWorkers() int { return min(runtime.GOMAXPROCS(0)-1, 4) }

// hashingReader reads a file ahead on its own goroutine, hashing and
// counting its bytes there, so the hashing runs beside the parsing. It
// holds a few chunks, never the file.
type hashingReader struct {
	full chan readChunk
	free chan []byte
	stop chan struct{}
	done chan struct{}
	cur  readChunk
	off  int
	h    hash.Hash
	n    int64 // bytes read from the file, set once the reading ended
}

type readChunk struct {
	b   []byte
	err error
}

const (
	readChunkSize = 256 << 10
	readChunks    = 4
)

func newHashingReader(r io.Reader) *hashingReader {
	hr := &hashingReader{
		full: make(chan readChunk, readChunks),
		free: make(chan []byte, readChunks),
		stop: make(chan struct{}),
		done: make(chan struct{}),
		h:    sha256.New(),
	}
	for range readChunks {
		hr.free <- make([]byte, readChunkSize)
	}
	go hr.readAhead(r)
	return hr
}

func (hr *hashingReader) readAhead(r io.Reader) {
	defer close(hr.done)
	var n int64
	for {
		var b []byte
		select {
		case b = <-hr.free:
		case <-hr.stop:
			return
		}
		k, err := io.ReadFull(r, b[:cap(b)])
		hr.h.Write(b[:k])
		n += int64(k)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		if err != nil {
			hr.n = n
		}
		select {
		case hr.full <- readChunk{b: b[:k], err: err}:
		case <-hr.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	for hr.off == len(hr.cur.b) {
		if hr.cur.err != nil {
			return 0, hr.cur.err
		}
		if hr.cur.b != nil {
			hr.free <- hr.cur.b
		}
		hr.cur, hr.off = <-hr.full, 0
	}
	n := copy(p, hr.cur.b[hr.off:])
	hr.off += n
	return n, nil
}

// sum reads the rest of the file and returns its SHA-256 and size.
func (hr *hashingReader) sum() (string, int64, error) {
	if _, err := io.Copy(io.Discard, hr); err != nil {
		return "", 0, err
	}
	<-hr.done
	return hex.EncodeToString(hr.h.Sum(nil)), hr.n, nil
}

// close stops the reading ahead; call it before the file is closed.
func (hr *hashingReader) close() {
	close(hr.stop)
	<-hr.done
}

// inspectPath reports on the file at path, the index-th of the command
// line, and says whether it is valid X12. An error reading the file comes
// as an exit status 2.
func inspectPath(ctx context.Context, w *bufio.Writer, path string, index int, opts inspectOptions) (bool, error) {
	fh, err := openRegular(path)
	if err != nil {
		return false, &exitError{code: 2, err: err}
	}
	defer fh.Close()
	hr := newHashingReader(fh)
	defer hr.close()
	limit := opts.spillLimit
	if limit <= 0 {
		limit = spillLimit
	}
	in := &inspection{opts: opts, path: path, w: w,
		hr:     hr,
		keys:   spill{limit: limit},
		errSp:  spill{limit: limit},
		warnSp: spill{limit: limit},
	}
	defer in.keys.reset()
	defer in.errSp.reset()
	defer in.warnSp.reset()
	if !opts.json {
		in.table = &textTable{sp: spill{limit: limit}}
		defer in.table.sp.reset()
	}
	return in.run(ctx, index)
}

// inspection is the report of one file being written.
type inspection struct {
	opts inspectOptions
	path string
	w    *bufio.Writer
	hr   *hashingReader
	rd   *envelope.Reader

	out    *jsonOut   // --json
	table  *textTable // text
	keys   spill      // --json: the keys array's members
	errSp  spill      // the errors: array members, or text lines
	warnSp spill      // text: the warning lines of interchanges, groups and sets
	nKeys  int
	nErrs  int
	eb     []byte

	ixOpen, gOpen     bool
	ixCount, ixGroups int
	ixSets, gSets     int
	ixFlag, gFlag     int64 // text: where the valid flags of the open levels are
	allValid          bool
}

func (in *inspection) run(ctx context.Context, index int) (bool, error) {
	in.rd = envelope.NewReader(in.hr, envelope.Options{KeepSegments: in.opts.json})
	errs := envelope.NewReportErrors(in.rd)
	in.allValid = true
	if in.opts.json {
		in.out = newJSONOut(in.w, in.opts.showPHI, in.opts.workers)
		b := in.out.buf()
		*b = envelope.AppendJSONString(append(*b, `{"file":`...), in.path)
		*b = append(*b, `,"interchanges":[`...)
	}
	err := in.read(ctx, errs)
	if err != nil {
		// A report cut short is left out, or if part of it was printed
		// already, its line is ended.
		if in.out != nil && in.out.abort() {
			in.w.WriteByte('\n')
		}
		return false, err
	}
	if in.out != nil {
		if err := in.out.close(); err != nil {
			return false, err
		}
	}
	sum, size, err := in.hr.sum()
	if err != nil {
		return false, &exitError{code: 2, err: fmt.Errorf("%s: %w", in.path, err)}
	}
	x12 := in.rd.X12()
	valid := x12 && len(in.rd.FileErrors()) == 0 && in.allValid
	if in.opts.json {
		return valid, in.finishJSON(x12, valid, sum, size)
	}
	return valid, in.finishText(index, x12, valid, sum, size)
}

// read reads the file to its end, writing the report's interchanges and
// spilling its errors and keys.
func (in *inspection) read(ctx context.Context, errs *envelope.ReportErrors) error {
	for {
		if err := ctx.Err(); err != nil {
			return &exitError{code: 2, err: err}
		}
		k, err := in.rd.Next()
		if err == io.EOF {
			if err := errs.Finish(in.addError); err != nil {
				return err
			}
			if !in.rd.X12() {
				if in.opts.json {
					return in.addKey(in.rd.FileKey())
				}
				return in.table.keyLine(in.rd.FileKey())
			}
			return nil
		}
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("%s: read: %w", in.path, err)}
		}
		switch k {
		case envelope.KindSet:
			err = in.set(in.rd.Set())
		case envelope.KindGroupEnd:
			err = in.groupEnd(in.rd.Group())
		case envelope.KindInterchangeEnd:
			err = in.interchangeEnd(in.rd.Interchange())
		}
		if err != nil {
			return err
		}
		if err := errs.Collect(k, in.addError); err != nil {
			return err
		}
	}
}

func (in *inspection) openInterchange() error {
	if in.ixOpen {
		return nil
	}
	ix := in.rd.Interchange()
	in.ixOpen, in.ixGroups, in.ixSets = true, 0, 0
	in.ixCount++
	if in.opts.json {
		b := in.out.buf()
		if in.ixCount > 1 {
			*b = append(*b, ',')
		}
		*b = envelope.AppendInterchangeHead(*b, ix)
		return nil
	}
	pos, err := in.table.envelopeLine(
		[]string{"  ISA ", ix.ControlNumber},
		[]string{ix.SenderQualifier, ":", ix.SenderID, " -> ", ix.ReceiverQualifier, ":", ix.ReceiverID},
		[]string{ix.Version, " ", ix.Usage}, unknownFlag, "")
	in.ixFlag = pos
	return err
}

func (in *inspection) openGroup() error {
	if err := in.openInterchange(); err != nil || in.gOpen {
		return err
	}
	g := in.rd.Group()
	in.gOpen, in.gSets = true, 0
	in.ixGroups++
	if in.opts.json {
		b := in.out.buf()
		if in.ixGroups > 1 {
			*b = append(*b, ',')
		}
		*b = envelope.AppendGroupHead(*b, g)
		return nil
	}
	pos, err := in.table.envelopeLine(
		[]string{"    GS ", g.ControlNumber}, []string{g.FunctionalID}, []string{g.Version}, unknownFlag, "")
	in.gFlag = pos
	return err
}

func (in *inspection) set(s *envelope.Set) error {
	if err := in.openGroup(); err != nil {
		return err
	}
	in.gSets++
	in.ixSets++
	if in.opts.json {
		if in.gSets > 1 {
			b := in.out.buf()
			*b = append(*b, ',')
		}
		if err := in.out.set(s); err != nil {
			return err
		}
		return in.addKey(s.Key)
	}
	if err := in.addWarnings(s.Warnings); err != nil {
		return err
	}
	var num [20]byte
	_, err := in.table.envelopeLine(
		[]string{"      ST ", s.Type, " ", s.ControlNumber},
		[]string{string(strconv.AppendInt(num[:0], int64(s.SegmentCount), 10)), " segments"},
		[]string{""}, flagOf(s.Valid()), s.Key)
	return err
}

func (in *inspection) groupEnd(g *envelope.Group) error {
	if err := in.openGroup(); err != nil {
		return err
	}
	in.gOpen = false
	if in.opts.json {
		b := in.out.buf()
		*b = envelope.AppendGroupTail(*b, g)
		return in.out.flushFull()
	}
	if err := in.addWarnings(g.Warnings); err != nil {
		return err
	}
	return in.table.setValid(in.gFlag, g.Valid())
}

func (in *inspection) interchangeEnd(ix *envelope.Interchange) error {
	if err := in.openInterchange(); err != nil {
		return err
	}
	in.ixOpen = false
	in.allValid = in.allValid && ix.Valid()
	if in.opts.json {
		b := in.out.buf()
		*b = envelope.AppendInterchangeTail(*b, ix)
		if in.ixSets == 0 {
			if err := in.addKey(ix.Key()); err != nil {
				return err
			}
		}
		return in.out.flushFull()
	}
	if err := in.addWarnings(ix.Warnings); err != nil {
		return err
	}
	return in.table.setValid(in.ixFlag, ix.Valid())
}

func (in *inspection) addKey(key string) error {
	in.eb = in.eb[:0]
	if in.nKeys > 0 {
		in.eb = append(in.eb, ',')
	}
	in.nKeys++
	in.eb = envelope.AppendJSONString(in.eb, key)
	_, err := in.keys.Write(in.eb)
	return err
}

func (in *inspection) addError(e *envelope.ParseError) error {
	in.eb = in.eb[:0]
	if in.opts.json {
		if in.nErrs > 0 {
			in.eb = append(in.eb, ',')
		}
		in.eb = envelope.AppendErrorJSON(in.eb, e)
	} else {
		in.eb = fmt.Appendf(in.eb, "  error %s: %s", e.Cause.Code, e.Error())
		if e.Cause.Ack != "" {
			in.eb = fmt.Appendf(in.eb, " [%s %s]", ackLabel(e.Cause.Level.String()), e.Cause.Ack)
		}
		in.eb = append(in.eb, '\n')
	}
	in.nErrs++
	_, err := in.errSp.Write(in.eb)
	return err
}

// appendWarning appends the text line of a warning, located as errors
// are: `  warning CODE: segment N (offset O): message`.
func appendWarning(b []byte, w envelope.Warning) []byte {
	if w.Segment > 0 {
		return fmt.Appendf(b, "  warning %s: segment %d (offset %d): %s\n", w.Code, w.Segment, w.Offset, w.Message)
	}
	return fmt.Appendf(b, "  warning %s: offset %d: %s\n", w.Code, w.Offset, w.Message)
}

// addWarnings spills the text lines of warnings (appendWarning).
func (in *inspection) addWarnings(ws []envelope.Warning) error {
	for _, w := range ws {
		in.eb = appendWarning(in.eb[:0], w)
		if _, err := in.warnSp.Write(in.eb); err != nil {
			return err
		}
	}
	return nil
}

func (in *inspection) finishJSON(x12, valid bool, sum string, size int64) error {
	w := in.w
	w.WriteString(`],"x12":`)
	w.WriteString(strconv.FormatBool(x12))
	w.WriteString(`,"valid":`)
	w.WriteString(strconv.FormatBool(valid))
	w.WriteString(`,"errors":[`)
	if _, err := io.Copy(w, in.errSp.reader()); err != nil {
		return err
	}
	w.WriteString(`],"keys":[`)
	if _, err := io.Copy(w, in.keys.reader()); err != nil {
		return err
	}
	w.WriteByte(']')
	w.Write(envelope.AppendWarningsField(nil, in.rd.FileWarnings()))
	fmt.Fprintf(w, `,"sha256":"%s","size":%d}`+"\n", sum, size)
	return nil
}

func (in *inspection) finishText(index int, x12, valid bool, sum string, size int64) error {
	w := in.w
	if index > 0 {
		w.WriteByte('\n')
	}
	status := "valid"
	switch {
	case !x12:
		status = "NOT X12"
	case !valid:
		status = "INVALID"
	}
	fmt.Fprintf(w, "%s  %s  %d bytes  sha256:%s\n", in.path, status, size, sum)
	if err := in.table.writeTo(w); err != nil {
		return err
	}
	if _, err := io.Copy(w, in.errSp.reader()); err != nil {
		return err
	}
	// Warnings follow the errors: the file's, then those of the
	// interchanges, groups and sets as they ended.
	if err := in.addWarningsTo(w, in.rd.FileWarnings()); err != nil {
		return err
	}
	_, err := io.Copy(w, in.warnSp.reader())
	return err
}

func (in *inspection) addWarningsTo(w *bufio.Writer, ws []envelope.Warning) error {
	for _, wn := range ws {
		if _, err := w.Write(appendWarning(nil, wn)); err != nil {
			return err
		}
	}
	return nil
}
