package answer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12/x12test"
)

func corpusFile(t *testing.T, name, typ string) [][]envelope.Segment {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Corpus(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return x12test.Sets(t, data, typ)
}

func text(t *testing.T, x12, typ string) [][]envelope.Segment {
	t.Helper()
	return x12test.Sets(t, []byte(x12), typ)
}

// The TR3's own example: three 837s, one accepted, two rejected, with
// located errors and context.
func TestParse999PartialAcceptanceSeveralAK2(t *testing.T) {
	sets := corpusFile(t, "stupidedi/999-X231A1-response-to-functional-group-containing-3-837s.edi", "999")
	if len(sets) != 1 {
		t.Fatalf("%d sets", len(sets))
	}
	acks := Parse999(sets[0])
	if len(acks) != 3 {
		t.Fatalf("%d acks, want 3", len(acks))
	}
	for i, want := range []string{Accepted, Rejected, Rejected} {
		a := acks[i]
		if a.Verdict != want || a.GroupVerdict != PartiallyAccepted || a.GroupCode != "P" {
			t.Errorf("ack %d: verdict %s, group %s", i, a.Verdict, a.GroupVerdict)
		}
		if a.Acknowledges.FunctionalID != "HC" || a.Acknowledges.GroupControlNumber != "17456" ||
			a.Acknowledges.Version != "005010X222A2" || a.Acknowledges.SetType != "837" {
			t.Errorf("ack %d acknowledges %+v", i, a.Acknowledges)
		}
		if a.GroupCounts == nil || *a.GroupCounts != (GroupCounts{"3", "3", "1"}) {
			t.Errorf("ack %d group counts %+v", i, a.GroupCounts)
		}
	}
	if acks[1].Acknowledges.SetControlNumber != "0002" || strings.Join(acks[1].Codes, ",") != "5" {
		t.Errorf("second ack %+v", acks[1])
	}
	e := acks[1].Errors
	if len(e) != 1 || e[0].SegmentID != "CLM" || e[0].Position != 22 || e[0].Code != "8" ||
		len(e[0].Context) != 1 || e[0].Context[0].Name != "CLM01" || e[0].Context[0].Reference != "123456789" ||
		len(e[0].Elements) != 1 || e[0].Elements[0].Position != 2 || e[0].Elements[0].Reference != "782" ||
		e[0].Elements[0].Code != "1" {
		t.Errorf("second ack errors %+v", e)
	}
	e = acks[2].Errors
	if len(e) != 1 || e[0].SegmentID != "REF" || len(e[0].Context) != 2 ||
		e[0].Context[0].Name != "SITUATIONAL TRIGGER" || e[0].Context[0].SegmentID != "CLM" ||
		e[0].Context[0].Position != 43 || e[0].Context[0].Element != "5:3" {
		t.Errorf("third ack errors %+v", e)
	}
}

func TestParse999GroupRejectedWithoutAK2(t *testing.T) {
	sets := text(t, "ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *260101*1200*^*00501*000000005*0*P*:~"+
		"GS*FA*CLEARING*RIVERSIDE*20260101*1200*5*X*005010X231A1~ST*999*0001*005010X231A1~"+
		"AK1*HC*17*005010X222A1~AK9*R*1*1*0*4~SE*4*0001~GE*1*5~IEA*1*000000005~", "999")
	acks := Parse999(sets[0])
	if len(acks) != 1 || acks[0].Verdict != Rejected || acks[0].Acknowledges.SetType != "" ||
		acks[0].Acknowledges.GroupControlNumber != "17" || strings.Join(acks[0].GroupCodes, ",") != "4" {
		t.Fatalf("acks %+v", acks)
	}
}

func TestParse999AcceptedWithErrorsAndRepetitionIK4(t *testing.T) {
	sets := text(t, "ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *260101*1200*^*00501*000000005*0*P*:~"+
		"GS*FA*CLEARING*RIVERSIDE*20260101*1200*5*X*005010X231A1~ST*999*0001*005010X231A1~"+
		"AK1*HC*17*005010X222A1~AK2*837*0001*005010X222A1~IK3*NM1*7*2010BA*8~IK4*9:1:2*67*7*BADVALUE~CTX*CLM01:PCN1~"+
		"IK5*E*5~AK9*E*1*1*1~SE*9*0001~GE*1*5~IEA*1*000000005~", "999")
	acks := Parse999(sets[0])
	if len(acks) != 1 || acks[0].Verdict != AcceptedWithErrors || acks[0].GroupVerdict != AcceptedWithErrors {
		t.Fatalf("acks %+v", acks)
	}
	el := acks[0].Errors[0].Elements[0]
	if el.Position != 9 || el.Component != 1 || el.Repetition != 2 || el.Reference != "67" || el.Code != "7" ||
		len(el.Context) != 1 || el.Context[0].Reference != "PCN1" {
		t.Errorf("element error %+v", el)
	}
	b, _ := json.Marshal(acks[0])
	if strings.Contains(string(b), "BADVALUE") {
		t.Errorf("the bad value IK404 is in the event: %s", b)
	}
}

func TestParse999Corpus(t *testing.T) {
	for name, want := range map[string]string{
		"imsweb-x12-parser/x12_999_rejected.txt": Rejected,
		"staedi/simple999.edi":                   Accepted,
		"pyx12/834_ls_le_ls_5010.999.txt":        Accepted,
	} {
		sets := corpusFile(t, name, "999")
		if len(sets) == 0 {
			t.Fatalf("%s: no 999", name)
		}
		acks := Parse999(sets[0])
		if len(acks) == 0 || acks[0].Verdict != want {
			t.Errorf("%s: %+v, want first verdict %s", name, acks, want)
		}
	}
}

func TestFromTA1(t *testing.T) {
	a := FromTA1(envelope.TA1{ControlNumber: "000000100", Date: "030809", Time: "0823", AckCode: "R", NoteCode: "024"})
	if a.Type != "TA1" || a.Verdict != Rejected || a.Acknowledges.InterchangeControlNumber != "000000100" ||
		a.Acknowledges.InterchangeDate != "030809" || strings.Join(a.Codes, ",") != "024" {
		t.Errorf("%+v", a)
	}
}

func TestParse277CACorpusRejection(t *testing.T) {
	sets := corpusFile(t, "imsweb-x12-parser/x12_277CA_rejected.txt", "277")
	st := Parse277CA(sets[0])
	if len(st) != 2 {
		t.Fatalf("%d statuses: %+v", len(st), st)
	}
	b, c := st[0], st[1]
	if b.Level != LevelBatch || b.Verdict != Accepted || b.TraceNumber != "11200001" || b.AcceptedCount != "1" ||
		b.AcceptedAmount == nil || b.AcceptedAmount.String() != "199.14" {
		t.Errorf("batch %+v", b)
	}
	if c.Level != LevelClaim || c.Verdict != Rejected || c.PatientControlNumber != "3920394930203" ||
		c.PayerClaimNumber != "1107000000001120" || c.ServiceFrom != "2009-03-11" || c.ServiceTo != "2009-03-11" ||
		c.Provider != "XX:123456789" || c.Source != "FI:141797357" {
		t.Errorf("claim %+v", c)
	}
	s := c.Statuses[0]
	if s.Category != "A7" || s.Code != "562" || s.Entity != "85" || s.Date != "2011-03-11" || s.Action != "WQ" ||
		s.Amount == nil || s.Amount.String() != "199.14" {
		t.Errorf("status %+v", s)
	}
}

const gen277 = "ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *260101*1200*^*00501*000000007*0*P*:~" +
	"GS*HN*CLEARING*RIVERSIDE*20260101*1200*7*X*005010X214~ST*277*0001*005010X214~BHT*0085*08*B1*20260101*1200*TH~" +
	"HL*1**20*1~NM1*AY*2*CLEARING*****46*CH1~TRN*1*B1~DTP*050*D8*20260101~DTP*009*D8*20260101~" +
	"HL*2*1*21*1~NM1*41*2*RIVERSIDE*****46*RS1~TRN*2*BATCH1~STC*A1:19:PR*20260101*WQ*300.00~QTY*90*1~QTY*AA*1~AMT*YU*100.00~AMT*YY*200.00~" +
	"HL*3*2*19*1~NM1*85*2*RIVERSIDE CLINIC*****XX*1234567893~TRN*1*PROV1~" +
	"HL*4*3*PT~NM1*QC*1*DOE*JANE****MI*M1~TRN*2*PCN-A~STC*A2:20*20260101*WQ*100.00~REF*1K*PAYER-A~REF*D9*CH-A~DTP*472*RD8*20251201-20251202~" +
	"HL*5*3*PT~NM1*QC*1*ROE*JOHN****MI*M2~TRN*2*PCN-B~STC*A7:21:85*20260101*U*200.00******A6:35~REF*1K*PAYER-B~DTP*472*D8*20251203~" +
	"SVC*HC:99213*200.00****1~STC*A7:453*20260101*U~REF*FJ*LINE1~DTP*472*D8*20251203~" +
	"SE*31*0001~GE*1*7~IEA*1*000000007~"

func TestParse277CARejectsOneClaimOfTwo(t *testing.T) {
	st := Parse277CA(text(t, gen277, "277")[0])
	if len(st) != 3 {
		t.Fatalf("%d statuses: %+v", len(st), st)
	}
	if st[0].Level != LevelBatch || st[0].RejectedCount != "1" || st[0].RejectedAmount.String() != "200.00" {
		t.Errorf("batch %+v", st[0])
	}
	a, b := st[1], st[2]
	if a.Verdict != Accepted || a.PatientControlNumber != "PCN-A" || a.ClearinghouseTrace != "CH-A" ||
		a.ServiceFrom != "2025-12-01" || a.ServiceTo != "2025-12-02" || a.Provider != "XX:1234567893" {
		t.Errorf("claim A %+v", a)
	}
	if b.Verdict != Rejected || b.PatientControlNumber != "PCN-B" || len(b.Statuses) != 1 ||
		len(b.Statuses[0].Further) != 1 || b.Statuses[0].Further[0].Category != "A6" ||
		len(b.Lines) != 1 || b.Lines[0].Procedure != "HC:99213" || b.Lines[0].LineControl != "LINE1" ||
		b.Lines[0].Statuses[0].Code != "453" {
		t.Errorf("claim B %+v", b)
	}
}

func TestParse277CABatchLevelRejection(t *testing.T) {
	x := "ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *260101*1200*^*00501*000000008*0*P*:~" +
		"GS*HN*CLEARING*RIVERSIDE*20260101*1200*8*X*005010X214~ST*277*0001*005010X214~BHT*0085*08*B2*20260101*1200*TH~" +
		"HL*1**20*1~NM1*AY*2*CLEARING*****46*CH1~TRN*1*B2~DTP*050*D8*20260101~DTP*009*D8*20260101~" +
		"HL*2*1*21*0~NM1*41*2*RIVERSIDE*****46*RS1~TRN*2*BATCH2~STC*A3:24:41*20260101*U*500.00~QTY*AA*3~AMT*YY*500.00~" +
		"SE*14*0001~GE*1*8~IEA*1*000000008~"
	st := Parse277CA(text(t, x, "277")[0])
	if len(st) != 1 || st[0].Level != LevelBatch || st[0].Verdict != Rejected || st[0].TraceNumber != "BATCH2" ||
		st[0].RejectedCount != "3" {
		t.Fatalf("statuses %+v", st)
	}
}

func TestVerdictTable(t *testing.T) {
	for cat, want := range map[string]string{"A0": Accepted, "A1": Accepted, "A2": Accepted, "A5": Accepted,
		"A3": Rejected, "A4": Rejected, "A6": Rejected, "A7": Rejected, "A8": Rejected, "E0": Rejected, "P1": Unknown} {
		if got := Verdict([]Status{{StatusCode: StatusCode{Category: cat}}}); got != want {
			t.Errorf("%s: %s, want %s", cat, got, want)
		}
	}
	if got := Verdict([]Status{{StatusCode: StatusCode{Category: "A1"}}, {StatusCode: StatusCode{Category: "A7"}}}); got != Rejected {
		t.Errorf("a rejection among acceptances: %s", got)
	}
}
