package inbox

import (
	"context"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
)

// FileFilter selects ledger rows: each field that is set narrows the
// selection. Since and Until bound the row's last update (since <= t <
// until); a zero time sets no bound.
type FileFilter struct {
	Source string
	Status FileStatus
	Since  time.Time
	Until  time.Time
}

// FileRow is a remote file's ledger row as an operator lists it.
type FileRow struct {
	Source, Path string
	Size         int64
	MTime        time.Time
	SHA256       string
	Status       FileStatus
	Attempts     int
	LastError    string
	// Sets counts the transaction sets the file held.
	Sets int
	// CorrelationID names the file's last arrival; its sets, sightings and
	// effects carry it.
	CorrelationID string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// FileSet is one transaction set an arrival claimed (an inbox row) or saw
// again (a sighting).
type FileSet struct {
	Key string
	// Outcome is the inbox row's status (processed, rejected, conflict)
	// or the sighting's kind (duplicate, business_duplicate, conflict,
	// effect_conflict).
	Outcome string
	// Type is the set's type (835, 837, ...), empty for a sighting.
	Type string
	// Reason is a rejected set's reason code, empty otherwise.
	Reason string
	// Sighting is true for a re-arrival recorded as a sighting.
	Sighting bool
	At       time.Time
}

// FileDetail is one arrival: its ledger row, the sets it claimed or saw
// again, and the outbox rows it produced (without payloads or responses:
// Payload and LastResponse are empty).
type FileDetail struct {
	File    FileRow
	Sets    []FileSet
	Effects []outbox.Row
}

// FileBrowser reads the ledger and what each arrival recorded, for the
// operator console. Both calls are read only and safe for concurrent use.
type FileBrowser interface {
	// ListFiles returns up to limit ledger rows f selects, the most
	// recently updated first.
	ListFiles(ctx context.Context, f FileFilter, limit int) ([]FileRow, error)
	// FileDetail returns the ledger row whose last arrival has
	// correlationID, with the inbox rows and sightings of that arrival and
	// the outbox rows it inserted (up to limit of each, in insertion
	// order); outbox.ErrNotFound when no ledger row has it.
	FileDetail(ctx context.Context, correlationID string, limit int) (FileDetail, error)
}
