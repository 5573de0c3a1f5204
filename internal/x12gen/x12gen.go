// Package x12gen generates synthetic, balanced X12 835 remittances for
// benchmarks, the demo and load tests. Every name, id and amount is
// invented. Output is streamed: any size can be produced in constant memory.
package x12gen

import (
	"bufio"
	"fmt"
	"io"
)

// Remit describes a generated 835 file.
type Remit struct {
	Sender, Receiver string // ISA06/ISA08 and GS02/GS03
	Control          int    // ISA13 and GS06 of the first interchange
	Interchanges     int    // default 1
	SetsPerGroup     int    // default 1
	ClaimsPerSet     int    // default 1
	LinesPerClaim    int    // default 1
	// Trace seeds TRN02: set i of the file gets "{Trace}{i}".
	Trace string
	// Payer is TRN03.
	Payer string
	// Element, Component, Repetition, Segment default to * : ^ ~.
	Element, Component, Repetition, Segment byte
	// EOL follows each segment terminator (e.g. "\n").
	EOL string
}

func (r *Remit) defaults() {
	if r.Sender == "" {
		r.Sender = "ACMEHP"
	}
	if r.Receiver == "" {
		r.Receiver = "RIVERSIDE"
	}
	if r.Control == 0 {
		r.Control = 1
	}
	if r.Interchanges == 0 {
		r.Interchanges = 1
	}
	if r.SetsPerGroup == 0 {
		r.SetsPerGroup = 1
	}
	if r.ClaimsPerSet == 0 {
		r.ClaimsPerSet = 1
	}
	if r.LinesPerClaim == 0 {
		r.LinesPerClaim = 1
	}
	if r.Trace == "" {
		r.Trace = "EFT"
	}
	if r.Payer == "" {
		r.Payer = "1512345678"
	}
	if r.Element == 0 {
		r.Element, r.Component, r.Repetition, r.Segment = '*', ':', '^', '~'
	}
}

// segw writes segments whose elements are joined with '*' and ':' in the
// format strings, translated to the chosen delimiters.
type segw struct {
	w    *bufio.Writer
	r    *Remit
	segs int
	err  error
}

func (s *segw) seg(format string, args ...any) {
	if s.err != nil {
		return
	}
	line := fmt.Sprintf(format, args...)
	b := []byte(line)
	for i, c := range b {
		switch c {
		case '*':
			b[i] = s.r.Element
		case ':':
			b[i] = s.r.Component
		}
	}
	s.w.Write(b)
	s.w.WriteByte(s.r.Segment)
	_, s.err = s.w.WriteString(s.r.EOL)
	s.segs++
}

// Write writes the file to w and returns the number of segments written.
func (r Remit) Write(w io.Writer) (segments int, err error) {
	r.defaults()
	s := &segw{w: bufio.NewWriterSize(w, 64<<10), r: &r}
	set := 0
	for ix := 0; ix < r.Interchanges; ix++ {
		ctl := r.Control + ix
		isa := fmt.Sprintf("ISA*00*          *00*          *ZZ*%-15s*ZZ*%-15s*261130*0930*%c*00501*%09d*0*P*%c",
			r.Sender, r.Receiver, r.Repetition, ctl, r.Component)
		s.seg("%s", isa)
		s.seg("GS*HP*%s*%s*20261130*0930*%d*X*005010X221A1", r.Sender, r.Receiver, ctl)
		for st := 1; st <= r.SetsPerGroup; st++ {
			set++
			start := s.segs
			lineAmt := 100
			claimCharge := lineAmt * r.LinesPerClaim
			claimPaid := (lineAmt - 25) * r.LinesPerClaim
			total := claimPaid * r.ClaimsPerSet
			s.seg("ST*835*%04d", st)
			s.seg("BPR*I*%d.00*C*ACH*CCP*01*999999999*DA*123456*%s**01*999988880*DA*98765*20261130", total, r.Payer)
			s.seg("TRN*1*%s%d*%s", r.Trace, set, r.Payer)
			s.seg("DTM*405*20261128")
			s.seg("N1*PR*ACME HEALTH PLAN")
			s.seg("N3*1 MAIN ST")
			s.seg("N4*SPRINGFIELD*IL*62701")
			s.seg("REF*2U*ACME01")
			s.seg("N1*PE*RIVERSIDE CLINIC*XX*1234567893")
			s.seg("LX*1")
			for c := 1; c <= r.ClaimsPerSet; c++ {
				s.seg("CLP*PCN%d-%d*1*%d.00*%d.00*%d.00*12*CLM%d%06d*11*1", set, c, claimCharge, claimPaid,
					10*r.LinesPerClaim, set, c)
				s.seg("NM1*QC*1*PATIENT%d*TEST****MI*MBR%06d", c%97, c)
				s.seg("DTM*232*20261101")
				for l := 1; l <= r.LinesPerClaim; l++ {
					s.seg("SVC*HC:99213:25*%d.00*%d.00**1", lineAmt, lineAmt-25)
					s.seg("DTM*472*20261101")
					s.seg("CAS*CO*45*15.00")
					s.seg("CAS*PR*2*10.00")
					s.seg("REF*6R*L%d-%d-%d", set, c, l)
				}
			}
			s.seg("SE*%d*%04d", s.segs-start+1, st)
		}
		s.seg("GE*%d*%d", r.SetsPerGroup, ctl)
		s.seg("IEA*1*%09d", ctl)
	}
	if s.err != nil {
		return s.segs, s.err
	}
	return s.segs, s.w.Flush()
}

// Reader returns a reader that streams the file, generated on the fly.
func (r Remit) Reader() io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		_, err := r.Write(pw)
		pw.CloseWithError(err)
	}()
	return pr
}
