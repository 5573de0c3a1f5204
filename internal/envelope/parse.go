package envelope

import (
	"io"
	"iter"
	"slices"
)

// File is everything Parse learned about one input: the whole tree of
// interchanges, groups and sets with their keys and errors, but no segment
// content.
type File struct {
	// X12 is false when the input has no readable ISA header.
	X12 bool
	// Key is "sha256:{hex}" of the whole input when it is not X12.
	Key string
	// Errors are the errors that belong to no interchange.
	Errors []*ParseError
	// Warnings are the leniencies that belong to no interchange.
	Warnings []Warning
	// WarningCounts counts the warnings of every level by code, the
	// sets' included (they stay counted when a caller lets the sets go).
	WarningCounts map[string]int
	Interchanges  []*Interchange
}

// Parse reads all of r and returns its envelope tree. Memory grows with the
// number of transaction sets, groups and interchanges, not with the bytes
// of r; to process sets one at a time, use a Reader, or Scan.
func Parse(r io.Reader, opts Options) (*File, error) {
	var ixs []*Interchange
	f, err := Scan(r, opts, func(k Kind, rd *Reader) error {
		switch k {
		case KindSet:
			rd.Group().Sets = append(rd.Group().Sets, rd.Set())
		case KindGroupEnd:
			rd.Interchange().Groups = append(rd.Interchange().Groups, rd.Group())
		case KindInterchangeEnd:
			ixs = append(ixs, rd.Interchange())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.Interchanges = ixs
	return f, nil
}

// Scan reads all of r as Parse does, calling visit after each item the
// Reader returns (a set, the end of a group, the end of an interchange),
// and returns what belongs to the file alone: X12, Key, Errors, Warnings
// and the WarningCounts of every level. It keeps nothing of the tree
// (Interchanges is empty): visit keeps what it needs, so a caller that
// keeps little reads a file of any number of interchanges in bounded
// memory. An error from visit stops the scan and is returned.
func Scan(r io.Reader, opts Options, visit func(k Kind, rd *Reader) error) (*File, error) {
	rd := NewReader(r, opts)
	f := &File{}
	for {
		k, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch k {
		case KindSet:
			f.countWarnings(rd.Set().Warnings)
		case KindGroupEnd:
			f.countWarnings(rd.Group().Warnings)
		case KindInterchangeEnd:
			f.countWarnings(rd.Interchange().Warnings)
		}
		if err := visit(k, rd); err != nil {
			return nil, err
		}
	}
	f.X12 = rd.X12()
	f.Key = rd.FileKey()
	f.Errors = rd.FileErrors()
	f.Warnings = rd.FileWarnings()
	f.countWarnings(f.Warnings)
	return f, nil
}

func (f *File) countWarnings(ws []Warning) {
	for _, w := range ws {
		if f.WarningCounts == nil {
			f.WarningCounts = make(map[string]int, 4)
		}
		f.WarningCounts[w.Code]++
	}
}

// Valid reports whether the input is X12 and free of errors.
func (f *File) Valid() bool {
	if !f.X12 || len(f.Errors) > 0 {
		return false
	}
	for _, ix := range f.Interchanges {
		if !ix.Valid() {
			return false
		}
	}
	return true
}

// Keys returns every inbox key in file order: one per transaction set, one
// per interchange that has no transaction sets, or the file's SHA-256 key
// when it is not X12.
func (f *File) Keys() []string {
	if !f.X12 {
		return []string{f.Key}
	}
	var keys []string
	for _, ix := range f.Interchanges {
		n := len(keys)
		for _, g := range ix.Groups {
			for _, s := range g.Sets {
				keys = append(keys, s.Key)
			}
		}
		if len(keys) == n {
			keys = append(keys, ix.Key())
		}
	}
	return keys
}

// Sets yields every transaction set of the file's interchanges and groups,
// in file order.
func (f *File) Sets() iter.Seq[*Set] {
	return func(yield func(*Set) bool) {
		for _, ix := range f.Interchanges {
			for _, g := range ix.Groups {
				for _, s := range g.Sets {
					if !yield(s) {
						return
					}
				}
			}
		}
	}
}

// AllErrors returns every error in the file, at every level, in file order.
func (f *File) AllErrors() []*ParseError {
	all := slices.Clone(f.Errors)
	for _, ix := range f.Interchanges {
		all = append(all, ix.Errors...)
		for _, g := range ix.Groups {
			all = append(all, g.Errors...)
			for _, s := range g.Sets {
				all = append(all, s.Errors...)
			}
		}
	}
	slices.SortStableFunc(all, func(a, b *ParseError) int {
		switch {
		case a.Offset < b.Offset:
			return -1
		case a.Offset > b.Offset:
			return 1
		}
		return 0
	})
	return all
}
