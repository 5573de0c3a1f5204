package x12gen

import (
	"bufio"
	"io"
)

// Claims describes a generated 837 professional file: one set holding
// Claims claims of one subscriber, each with two service lines. Every name
// and id is invented.
type Claims struct {
	Sender, Receiver string
	Control          int
	Claims           int
	// IDPrefix seeds CLM01: claim i gets "{IDPrefix}{i}".
	IDPrefix string
	// Frequency is the claim frequency code CLM05-3: 1 (original, the
	// default), 7 (replacement) or 8 (void).
	Frequency string
	EOL       string
}

// Write writes the file to w.
func (c Claims) Write(w io.Writer) error {
	if c.Sender == "" {
		c.Sender = "RIVERSIDE"
	}
	if c.Receiver == "" {
		c.Receiver = "ACMEHP"
	}
	if c.Control == 0 {
		c.Control = 1
	}
	if c.Claims == 0 {
		c.Claims = 1
	}
	if c.IDPrefix == "" {
		c.IDPrefix = "CLAIM"
	}
	if c.Frequency == "" {
		c.Frequency = "1"
	}
	r := &Remit{Element: '*', Component: ':', Repetition: '^', Segment: '~', EOL: c.EOL}
	s := &segw{w: bufio.NewWriter(w), r: r}
	s.seg("ISA*00*          *00*          *ZZ*%-15s*ZZ*%-15s*261130*0930*^*00501*%09d*0*P*:", c.Sender, c.Receiver, c.Control)
	s.seg("GS*HC*%s*%s*20261130*0930*%d*X*005010X222A1", c.Sender, c.Receiver, c.Control)
	start := s.segs
	s.seg("ST*837*0001*005010X222A1")
	s.seg("BHT*0019*00*%d*20261130*0930*CH", c.Control)
	s.seg("NM1*41*2*RIVERSIDE CLINIC*****46*TGJ23")
	s.seg("PER*IC*BILLING OFFICE*TE*5555550100")
	s.seg("NM1*40*2*ACME HEALTH PLAN*****46*66783JJT")
	s.seg("HL*1**20*1")
	s.seg("NM1*85*2*RIVERSIDE CLINIC*****XX*1234567893")
	s.seg("N3*1 CLINIC WAY")
	s.seg("N4*SPRINGFIELD*IL*62701")
	s.seg("REF*EI*370000000")
	s.seg("HL*2*1*22*0")
	s.seg("SBR*P*18*******CI")
	s.seg("NM1*IL*1*PATIENT*TEST****MI*MBR000001")
	s.seg("NM1*PR*2*ACME HEALTH PLAN*****PI*ACME01")
	for i := 1; i <= c.Claims; i++ {
		s.seg("CLM*%s%d*150.00***11:B:%s*Y*A*Y*I", c.IDPrefix, i, c.Frequency)
		s.seg("HI*ABK:J0300*ABF:R05")
		s.seg("LX*1")
		s.seg("SV1*HC:99213*100.00*UN*1***1")
		s.seg("DTP*472*D8*20261101")
		s.seg("LX*2")
		s.seg("SV1*HC:87070*50.00*UN*1***1")
		s.seg("DTP*472*D8*20261101")
	}
	s.seg("SE*%d*0001", s.segs-start+1)
	s.seg("GE*1*%d", c.Control)
	s.seg("IEA*1*%09d", c.Control)
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}
