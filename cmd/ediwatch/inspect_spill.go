package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// spill holds report parts that are printed after others still being read
// (the keys and errors of `inspect --json`, the table and errors of the
// text form): in memory up to limit bytes, then in an unlinked temporary
// file, so memory stays bounded whatever the size of the file inspected.
type spill struct {
	limit int
	buf   []byte
	f     *os.File
	fn    int64 // bytes in f
}

const spillLimit = 256 << 10

func (s *spill) Write(p []byte) (int, error) {
	if len(s.buf)+len(p) > s.limit && len(s.buf) > 0 {
		if err := s.toFile(s.buf); err != nil {
			return 0, err
		}
		s.buf = s.buf[:0]
	}
	if len(p) > s.limit {
		if err := s.toFile(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	s.buf = append(s.buf, p...)
	return len(p), nil
}

func (s *spill) toFile(p []byte) error {
	if s.f == nil {
		f, err := os.CreateTemp("", "ediwatch-inspect-*")
		if err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		// Unlinked at once: nothing is left behind, even after a crash.
		os.Remove(f.Name())
		s.f = f
	}
	n, err := s.f.WriteAt(p, s.fn)
	s.fn += int64(n)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	return nil
}

// size returns the number of bytes written.
func (s *spill) size() int64 { return s.fn + int64(len(s.buf)) }

// patch overwrites the byte at pos, already written.
func (s *spill) patch(pos int64, b byte) error {
	if pos >= s.fn {
		s.buf[pos-s.fn] = b
		return nil
	}
	if _, err := s.f.WriteAt([]byte{b}, pos); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	return nil
}

// reader returns what was written. Writing again invalidates it.
func (s *spill) reader() io.Reader {
	if s.f == nil {
		return bytes.NewReader(s.buf)
	}
	return io.MultiReader(io.NewSectionReader(s.f, 0, s.fn), bytes.NewReader(s.buf))
}

// reset empties the spill for reuse and releases its file.
func (s *spill) reset() {
	if s.f != nil {
		s.f.Close()
		s.f, s.fn = nil, 0
	}
	s.buf = s.buf[:0]
}
