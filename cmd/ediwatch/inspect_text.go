package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// textTable is the envelope table of the text report (one line per
// interchange, group and set), spilled as the file is read and aligned once
// every line is known: the output is what text/tabwriter (padding 2,
// spaces) gives the whole table, without holding it in memory.
//
// The table's lines all have the same cells, so tabwriter's column blocks
// span the whole table and each column is as wide as its widest cell plus
// the padding. A cell holding a byte tabwriter interprets (tab, vertical
// tab, form feed, newline, 0xff) breaks that shape; such a table is given
// to a tabwriter after all, in memory, to keep its output exact.
type textTable struct {
	sp        spill
	rec       []byte
	ncells    int // cells per line, 0 before the first line
	widths    [validCol + 1]int
	irregular bool
}

// validCol is the column of the valid word in an interchange, group or set
// line. Its cell is spilled as one byte, patched when the interchange or
// group ends: validFlag, invalidFlag or unknownFlag.
const validCol = 3

const (
	validFlag   = 'V'
	invalidFlag = 'I'
	unknownFlag = '?'
)

func flagOf(ok bool) byte {
	if ok {
		return validFlag
	}
	return invalidFlag
}

func (t *textTable) start() { t.rec = t.rec[:0] }

// cell appends a cell made of parts to the line being built.
func (t *textTable) cell(col int, parts ...string) {
	n, w := 0, 0
	for i, p := range parts {
		p = textSafe(p)
		parts[i] = p
		n += len(p)
		w += utf8.RuneCountInString(p)
		if strings.ContainsAny(p, "\t\v\f\n\xff") {
			t.irregular = true
		}
	}
	t.rec = binary.AppendUvarint(t.rec, uint64(n))
	for _, p := range parts {
		t.rec = append(t.rec, p...)
	}
	if col < len(t.widths) && w > t.widths[col] {
		t.widths[col] = w
	}
}

// end writes the line built, of ncells cells, and returns the spill
// position of the line's start.
func (t *textTable) end(ncells int) (int64, error) {
	if t.ncells != 0 && t.ncells != ncells {
		t.irregular = true
	}
	t.ncells = ncells
	pos := t.sp.size()
	if _, err := t.sp.Write([]byte{byte(ncells)}); err != nil {
		return 0, err
	}
	_, err := t.sp.Write(t.rec)
	return pos, err
}

// envelopeLine writes an interchange, group or set line and returns the
// position of its valid flag.
func (t *textTable) envelopeLine(c0, c1, c2 []string, flag byte, c4 ...string) (int64, error) {
	t.start()
	t.cell(0, c0...)
	t.cell(1, c1...)
	t.cell(2, c2...)
	t.rec = append(t.rec, 1, flag)
	if flag != unknownFlag {
		t.noteValid(flag)
	}
	flagAt := len(t.rec) - 1
	t.cell(4, c4...)
	pos, err := t.end(5)
	return pos + 1 + int64(flagAt), err
}

func (t *textTable) noteValid(flag byte) {
	t.widths[validCol] = max(t.widths[validCol], len(validWord(flag == validFlag)))
}

// setValid patches the valid flag at pos.
func (t *textTable) setValid(pos int64, ok bool) error {
	t.noteValid(flagOf(ok))
	return t.sp.patch(pos, flagOf(ok))
}

// keyLine writes the line of a file that is not X12: its key.
func (t *textTable) keyLine(key string) error {
	t.start()
	t.cell(0, "  key")
	t.cell(1, key)
	_, err := t.end(2)
	return err
}

// writeTo prints the aligned table.
func (t *textTable) writeTo(w io.Writer) error {
	if t.ncells == 0 {
		return nil
	}
	br := bufio.NewReaderSize(t.sp.reader(), 64<<10)
	var tw *tabwriter.Writer
	out := w
	if t.irregular {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		out = tw
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	var cell []byte
	for {
		n, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		for j := 0; j < int(n); j++ {
			size, err := binary.ReadUvarint(br)
			if err != nil {
				return fmt.Errorf("table spill: %w", noEOF(err))
			}
			if cap(cell) < int(size) {
				cell = make([]byte, size)
			}
			cell = cell[:size]
			if _, err := io.ReadFull(br, cell); err != nil {
				return fmt.Errorf("table spill: %w", noEOF(err))
			}
			text := cell
			if n == 5 && j == validCol {
				text = []byte(validWord(cell[0] == validFlag))
			}
			bw.Write(text)
			switch {
			case j == int(n)-1:
				bw.WriteByte('\n')
			case t.irregular:
				bw.WriteByte('\t')
			default:
				for pad := t.widths[j] + 2 - utf8.RuneCount(text); pad > 0; pad-- {
					bw.WriteByte(' ')
				}
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// textSafe returns v with its control characters (C0, DEL, C1, and any
// rune unicode.IsPrint refuses) and its invalid UTF-8 bytes written as
// \xNN: the table shows envelope values as the file holds them, and a
// file's bytes must not reach the operator's terminal as escape sequences
// (ESC [2J clears it, ESC ] sets its title) nor break the table's lines.
func textSafe(v string) string {
	i := 0
	for i < len(v) && v[i] >= 0x20 && v[i] < 0x7F {
		i++
	}
	if i == len(v) {
		return v
	}
	const hexDigits = "0123456789abcdef"
	b := make([]byte, 0, len(v)+8)
	b = append(b, v[:i]...)
	for i < len(v) {
		r, n := utf8.DecodeRuneInString(v[i:])
		if r != utf8.RuneError && r >= 0x20 && r != 0x7F && (r < 0x80 || unicode.IsPrint(r)) {
			b = append(b, v[i:i+n]...)
		} else {
			for _, c := range []byte(v[i : i+n]) {
				b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			}
		}
		i += n
	}
	return string(b)
}
