package envelope

// Report is the JSON form of a File: the envelope tree with keys, content
// hashes and located errors, and no segment content. `ediwatch inspect
// --json` prints it; golden tests compare it.
type Report struct {
	X12          bool                `json:"x12"`
	Valid        bool                `json:"valid"`
	Errors       []ErrorReport       `json:"errors"`
	Keys         []string            `json:"keys"`
	Interchanges []InterchangeReport `json:"interchanges"`
	// Warnings are the file-level warnings (before the first ISA); the
	// others are in the interchange, group or set they belong to.
	Warnings []Warning `json:"warnings,omitempty"`
}

// ErrorReport is one located error.
type ErrorReport struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Level    string `json:"level"`
	Ack      string `json:"ack,omitempty"`
	Offset   int64  `json:"offset"`
	Segment  int    `json:"segment"`
	Position int    `json:"position,omitempty"`
}

// InterchangeReport describes one interchange.
type InterchangeReport struct {
	Sender        string        `json:"sender"`
	Receiver      string        `json:"receiver"`
	ControlNumber string        `json:"control_number"`
	Version       string        `json:"version"`
	Usage         string        `json:"usage"`
	AckRequested  bool          `json:"ack_requested"`
	Delimiters    string        `json:"delimiters"`
	Canonical     bool          `json:"canonical_isa"`
	Key           string        `json:"key"`
	Valid         bool          `json:"valid"`
	Errors        []ErrorReport `json:"errors"`
	Warnings      []Warning     `json:"warnings,omitempty"`
	TA1           int           `json:"ta1_segments,omitempty"`
	Groups        []GroupReport `json:"groups"`
}

// GroupReport describes one functional group.
type GroupReport struct {
	FunctionalID    string        `json:"functional_id"`
	ControlNumber   string        `json:"control_number"`
	Version         string        `json:"version"`
	Valid           bool          `json:"valid"`
	Errors          []ErrorReport `json:"errors"`
	Warnings        []Warning     `json:"warnings,omitempty"`
	TransactionSets []SetReport   `json:"transaction_sets"`
}

// SetReport describes one transaction set.
type SetReport struct {
	Type          string        `json:"type"`
	ControlNumber string        `json:"control_number"`
	Key           string        `json:"key"`
	ContentHash   string        `json:"content_hash"`
	Segments      int           `json:"segments"`
	Valid         bool          `json:"valid"`
	Errors        []ErrorReport `json:"errors"`
	Warnings      []Warning     `json:"warnings,omitempty"`
	// Document is filled by callers that parse the set's business document.
	Document any `json:"document,omitempty"`
}

// Report returns the JSON form of f. Every slice is non-nil, so empty lists
// print as [].
func (f *File) Report() *Report {
	rep := &Report{
		X12: f.X12, Valid: f.Valid(), Errors: errorReports(f.AllErrors()), Keys: f.Keys(),
		Interchanges: []InterchangeReport{}, Warnings: f.Warnings,
	}
	if rep.Keys == nil {
		rep.Keys = []string{}
	}
	for _, ix := range f.Interchanges {
		ir := InterchangeReport{
			Sender: ix.Sender(), Receiver: ix.Receiver(), ControlNumber: ix.ControlNumber,
			Version: ix.Version, Usage: ix.Usage, AckRequested: ix.AckRequested,
			Delimiters: ix.Delimiters.String(), Canonical: ix.Canonical, Key: ix.Key(),
			Valid: ix.Valid(), Errors: errorReports(ix.Errors), Warnings: ix.Warnings, TA1: len(ix.TA1),
			Groups: []GroupReport{},
		}
		for _, g := range ix.Groups {
			gr := GroupReport{
				FunctionalID: g.FunctionalID, ControlNumber: g.ControlNumber, Version: g.Version,
				Valid: g.Valid(), Errors: errorReports(g.Errors), Warnings: g.Warnings, TransactionSets: []SetReport{},
			}
			for _, s := range g.Sets {
				gr.TransactionSets = append(gr.TransactionSets, SetReport{
					Type: s.Type, ControlNumber: s.ControlNumber, Key: s.Key,
					ContentHash: s.HashHex(), Segments: s.SegmentCount,
					Valid: s.Valid(), Errors: errorReports(s.Errors), Warnings: s.Warnings,
				})
			}
			ir.Groups = append(ir.Groups, gr)
		}
		rep.Interchanges = append(rep.Interchanges, ir)
	}
	return rep
}

func errorReports(errs []*ParseError) []ErrorReport {
	out := make([]ErrorReport, 0, len(errs))
	for _, e := range errs {
		out = append(out, ErrorReport{
			Code: e.Cause.Code, Message: e.Error(), Level: e.Cause.Level.String(), Ack: e.Cause.Ack,
			Offset: e.Offset, Segment: e.Segment, Position: e.Position,
		})
	}
	return out
}
