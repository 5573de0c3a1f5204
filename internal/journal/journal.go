// Package journal is the pollers' witness outside the database: an
// append-only file on local disk with one line for every file a poller
// deleted or moved from a drop, written (synchronously) before the file
// goes. After a failover or a restore has taken recent commits with it,
// `ediwatch reconcile --journal` finds the files the journal says were
// removed whose ingestion the store no longer has: payments no replay
// of the drop can bring back.
//
// A line is JSON: the time, source, ledger path, size, SHA-256 and action
// of one file. None holds file content or patient data.
package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Entry is one file removed from a drop.
type Entry struct {
	At     time.Time `json:"at"`
	Source string    `json:"source"`
	Path   string    `json:"path"` // as the ledger knows it
	Size   int64     `json:"size"`
	SHA256 string    `json:"sha256"`
	Action string    `json:"action"` // delete or move
}

// Writer appends entries to a journal file. It is safe for concurrent
// use.
type Writer struct {
	mu sync.Mutex
	f  *os.File
}

// Open opens (creating, mode 0600) the journal at path for appending.
// Each entry is one write to a file opened O_DSYNC: on disk when Record
// returns, at the cost of one sequential synchronous write per file.
func Open(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_SYNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Writer{f: f}, nil
}

// Record appends e. Until it returns nil the file must not be removed.
func (w *Writer) Record(e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// Read returns the entries of r at or after since, oldest first. A last
// line cut short (a crash during its write) is skipped; any other line
// that does not decode is an error naming its number.
func Read(r io.Reader, since time.Time) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var bad error
	for n := 1; sc.Scan(); n++ {
		if bad != nil {
			return nil, bad // a bad line that was not the last
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			bad = fmt.Errorf("journal: line %d: %w", n, err)
			continue
		}
		if !e.At.Before(since) {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return out, nil
}
