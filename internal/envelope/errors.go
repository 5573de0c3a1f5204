package envelope

import (
	"fmt"
	"strconv"
	"strings"
)

// Level says which envelope layer an error belongs to, and so which
// acknowledgment reports it: TA1 for the interchange, AK9 for a functional
// group, IK5 (with IK3 for a segment) for a transaction set.
type Level uint8

const (
	// LevelFile is an error about the file itself: it is not X12, or holds
	// bytes outside any interchange.
	LevelFile Level = iota + 1
	// LevelInterchange is reported in a TA1 (TA104=R, TA105=Cause.Ack).
	LevelInterchange
	// LevelGroup is reported in a 999 AK9 (AK905..=Cause.Ack).
	LevelGroup
	// LevelSet is reported in a 999 IK5 (IK502=Cause.Ack) and, when
	// Cause.Segment is set, an IK3 for the offending segment.
	LevelSet
)

func (l Level) String() string {
	switch l {
	case LevelFile:
		return "file"
	case LevelInterchange:
		return "interchange"
	case LevelGroup:
		return "group"
	case LevelSet:
		return "transaction_set"
	}
	return "level(" + strconv.Itoa(int(l)) + ")"
}

// Cause is a sentinel describing one kind of envelope error. Compare with
// errors.Is against the exported values below; the fields say how the error
// is acknowledged.
type Cause struct {
	// Code is a stable, machine-readable name, e.g. "se01_count".
	Code string
	// Level is the envelope layer the error belongs to.
	Level Level
	// Ack is the code the acknowledgment carries: the TA105 interchange note
	// code (I18) for LevelInterchange, the AK905 functional group syntax
	// error code (716) for LevelGroup, the IK502 transaction set syntax error
	// code (718) for LevelSet. Empty for LevelFile.
	Ack string
	// Segment is the IK304 segment syntax error code (620) for set-level
	// errors that point at one segment; empty otherwise.
	Segment string
	msg     string
}

func (c *Cause) Error() string { return c.msg }

// Sentinel causes. Each maps to the acknowledgment code that reports it.
var (
	ErrNotX12             = &Cause{Code: "not_x12", Level: LevelFile, msg: "not X12: no ISA interchange header"}
	ErrUTF16              = &Cause{Code: "utf16", Level: LevelFile, msg: "file is UTF-16 encoded; X12 must be single-byte ASCII or UTF-8"}
	ErrBinary             = &Cause{Code: "binary", Level: LevelFile, msg: "file holds binary data, not X12 text"}
	ErrDataBeforeISA      = &Cause{Code: "data_before_isa", Level: LevelFile, msg: "data before the first ISA"}
	ErrOutsideInterchange = &Cause{Code: "outside_interchange", Level: LevelFile, msg: "segment outside any interchange"}

	ErrISAHeader          = &Cause{Code: "isa_header", Level: LevelInterchange, Ack: "022", msg: "unreadable ISA header"}
	ErrElementSeparator   = &Cause{Code: "element_separator", Level: LevelInterchange, Ack: "026", msg: "invalid data element separator"}
	ErrComponentSeparator = &Cause{Code: "component_separator", Level: LevelInterchange, Ack: "027", msg: "invalid component element separator"}
	ErrSegmentTerminator  = &Cause{Code: "segment_terminator", Level: LevelInterchange, Ack: "004", msg: "invalid segment terminator"}
	ErrISASenderQual      = &Cause{Code: "isa05_value", Level: LevelInterchange, Ack: "005", msg: "invalid interchange sender id qualifier (ISA05)"}
	ErrISASenderID        = &Cause{Code: "isa06_value", Level: LevelInterchange, Ack: "006", msg: "invalid interchange sender id (ISA06)"}
	ErrISAReceiverQual    = &Cause{Code: "isa07_value", Level: LevelInterchange, Ack: "007", msg: "invalid interchange receiver id qualifier (ISA07)"}
	ErrISAReceiverID      = &Cause{Code: "isa08_value", Level: LevelInterchange, Ack: "008", msg: "invalid interchange receiver id (ISA08)"}
	ErrISADate            = &Cause{Code: "isa_date", Level: LevelInterchange, Ack: "014", msg: "invalid interchange date (ISA09)"}
	ErrISATime            = &Cause{Code: "isa_time", Level: LevelInterchange, Ack: "015", msg: "invalid interchange time (ISA10)"}
	ErrISADuplicate       = &Cause{Code: "isa13_duplicate", Level: LevelInterchange, Ack: "025", msg: "duplicate interchange control number (ISA13) from the same sender in the file"}
	ErrISAVersion         = &Cause{Code: "isa_version", Level: LevelInterchange, Ack: "017", msg: "invalid interchange version (ISA12)"}
	ErrISAControlNumber   = &Cause{Code: "isa13_syntax", Level: LevelInterchange, Ack: "018", msg: "invalid interchange control number (ISA13)"}
	ErrISAAckRequested    = &Cause{Code: "isa14_value", Level: LevelInterchange, Ack: "019", msg: "invalid acknowledgment requested value (ISA14)"}
	ErrISAUsage           = &Cause{Code: "isa15_value", Level: LevelInterchange, Ack: "020", msg: "invalid test indicator (ISA15)"}
	ErrIEAControlNumber   = &Cause{Code: "iea02_mismatch", Level: LevelInterchange, Ack: "001", msg: "IEA02 does not match ISA13"}
	ErrIEAGroupCount      = &Cause{Code: "iea01_count", Level: LevelInterchange, Ack: "021", msg: "IEA01 does not match the number of functional groups"}
	ErrIEAMissing         = &Cause{Code: "iea_missing", Level: LevelInterchange, Ack: "023", msg: "interchange ends without IEA"}
	ErrTA1Syntax          = &Cause{Code: "ta1_syntax", Level: LevelInterchange, Ack: "024", msg: "invalid TA1 segment"}
	ErrOutsideGroup       = &Cause{Code: "outside_group", Level: LevelInterchange, Ack: "024", msg: "segment outside any functional group"}
	ErrSegmentTooLong     = &Cause{Code: "segment_too_long", Level: LevelInterchange, Ack: "024", msg: "segment longer than the maximum allowed"}

	ErrGSSyntax        = &Cause{Code: "gs_syntax", Level: LevelGroup, Ack: "6", msg: "invalid GS segment"}
	ErrGSFunctionalID  = &Cause{Code: "gs01_missing", Level: LevelGroup, Ack: "1", msg: "missing functional identifier code (GS01)"}
	ErrGSVersion       = &Cause{Code: "gs08_missing", Level: LevelGroup, Ack: "2", msg: "missing version, release, industry identifier code (GS08)"}
	ErrGEControlNumber = &Cause{Code: "ge02_mismatch", Level: LevelGroup, Ack: "4", msg: "GE02 does not match GS06"}
	ErrGESetCount      = &Cause{Code: "ge01_count", Level: LevelGroup, Ack: "5", msg: "GE01 does not match the number of transaction sets"}
	ErrGEMissing       = &Cause{Code: "ge_missing", Level: LevelGroup, Ack: "3", msg: "functional group ends without GE"}
	ErrGSDuplicate     = &Cause{Code: "gs06_duplicate", Level: LevelGroup, Ack: "19", msg: "GS06 is not unique within the interchange"}
	ErrOutsideSet      = &Cause{Code: "outside_set", Level: LevelGroup, Ack: "1", msg: "segment outside any transaction set"}

	ErrSTType          = &Cause{Code: "st01_invalid", Level: LevelSet, Ack: "6", msg: "missing or invalid transaction set identifier (ST01)"}
	ErrSTControlNumber = &Cause{Code: "st02_invalid", Level: LevelSet, Ack: "7", msg: "missing or invalid transaction set control number (ST02)"}
	ErrSEControlNumber = &Cause{Code: "se02_mismatch", Level: LevelSet, Ack: "3", msg: "SE02 does not match ST02"}
	ErrSESegmentCount  = &Cause{Code: "se01_count", Level: LevelSet, Ack: "4", msg: "SE01 does not match the number of segments"}
	ErrSEMissing       = &Cause{Code: "se_missing", Level: LevelSet, Ack: "2", msg: "transaction set ends without SE"}
	ErrSTDuplicate     = &Cause{Code: "st02_duplicate", Level: LevelSet, Ack: "23", msg: "ST02 is not unique within the functional group"}
	// ErrSetSegmentTooLong is ErrSegmentTooLong inside a transaction set:
	// IK304 8 (segment has data element errors), IK502 5.
	ErrSetSegmentTooLong = &Cause{Code: "segment_too_long", Level: LevelSet, Ack: "5", Segment: "8", msg: "segment longer than the maximum allowed"}
	ErrSegmentID         = &Cause{Code: "segment_id", Level: LevelSet, Ack: "5", Segment: "1", msg: "unrecognized segment identifier"}
	// ErrInvalidCharacter is a control character (0x00-0x1F or 0x7F, not
	// a delimiter, CR or LF) inside an element of a set: outside the X12
	// basic and extended character sets, which every HIPAA guide uses
	// (IK304 8, IK502 5).
	ErrInvalidCharacter = &Cause{Code: "invalid_character", Level: LevelSet, Ack: "5", Segment: "8", msg: "segment holds a control character outside the X12 character set"}
)

// ParseError is one located envelope error. It never quotes segment content
// beyond envelope control values, so it is safe to log.
type ParseError struct {
	// Offset is the byte offset of the segment in the file.
	Offset int64
	// Segment is the 1-based index of the segment in the file.
	Segment int
	// Position is the 1-based position of the segment within its transaction
	// set (ST is 1), or 0 outside a transaction set.
	Position int
	// SegmentID is the segment identifier (e.g. "SE"), when known.
	SegmentID string
	// Cause is the sentinel; errors.Is(err, ErrSESegmentCount) works.
	Cause *Cause
	// Detail adds the values that disagree, e.g. "SE01=25, counted 34".
	Detail string
}

func (e *ParseError) Error() string {
	msg := e.Cause.msg
	if e.SegmentID != "" && strings.HasPrefix(msg, "segment ") {
		msg = "segment " + e.SegmentID + msg[len("segment"):]
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Segment == 0 {
		return fmt.Sprintf("offset %d: %s", e.Offset, msg)
	}
	return fmt.Sprintf("segment %d (offset %d): %s", e.Segment, e.Offset, msg)
}

// Unwrap returns the sentinel cause.
func (e *ParseError) Unwrap() error { return e.Cause }
