package process

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
)

const ta1Alone = "ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *261130*1000*^*00501*000000702*1*P*:~" +
	"TA1*000000041*261130*0930*R*024~IEA*0*000000702~"

// A TA1 alone gives one ack.received event naming the interchange it
// answers, and is itself never acknowledged, though ISA14 asks for it.
func TestTA1AloneIsAnEventAndNotAcknowledged(t *testing.T) {
	r := run(t, []byte(ta1Alone))
	var received []Effect
	for _, it := range r.items {
		if it.Received != nil {
			received = append(received, *it.Received)
		}
	}
	if len(r.sets) != 0 || len(r.acks) != 0 || len(received) != 1 || received[0].Kind != KindAckReceived {
		t.Fatalf("sets %d, acks %+v, received %+v", len(r.sets), r.acks, received)
	}
	var ev AckReceivedEvent
	if err := json.Unmarshal(received[0].Payload, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "TA1" || ev.Verdict != "rejected" || ev.Acknowledges.InterchangeControlNumber != "000000041" ||
		strings.Join(ev.Codes, ",") != "024" || ev.Sender != "ZZ:CLEARING" {
		t.Errorf("event %+v", ev)
	}
	if !strings.HasPrefix(received[0].Key, "ackrcv:ZZ:CLEARING:ZZ:RIVERSIDE:TA1:000000041:") {
		t.Errorf("key %s", received[0].Key)
	}
}

func ack999(ctl, ack2 string, isa14 string) []byte {
	return []byte("ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *261130*1000*^*00501*00000" + ctl + "*" + isa14 + "*P*:~" +
		"GS*FA*CLEARING*RIVERSIDE*20261130*1000*" + ctl + "*X*005010X231A1~ST*999*" + ctl + "*005010X231A1~" +
		"AK1*HC*41*005010X222A1~" + ack2 + "AK9*P*2*2*1~SE**" + ctl + "~GE*1*" + ctl + "~IEA*1*00000" + ctl + "~")
}

// fix999 sets SE01.
func fix999(b []byte) []byte {
	s := string(b)
	st := strings.Index(s, "ST*999")
	se := strings.Index(s, "SE**")
	n := strings.Count(s[st:se], "~") + 1
	return []byte(s[:se] + "SE*" + itoa(n) + s[se+3:])
}

// A 999 with two AK2 loops gives two events; re-sent under new control
// numbers it gives the same effect keys and hashes (a business
// duplicate), and it is never acknowledged, even when ISA14 asks.
func TestReceived999IsTwoEventsKeyedByContent(t *testing.T) {
	body := "AK2*837*0001*005010X222A1~IK5*A~AK2*837*0002*005010X222A1~IK3*CLM*9**8~CTX*CLM01:PCN-2~IK4*2*782*1~IK5*R*5~"
	a := run(t, fix999(ack999("7001", body, "1")))
	b := run(t, fix999(ack999("7002", body, "0")))
	if len(a.sets) != 1 || a.sets[0].Status != Processed || len(a.sets[0].Effects) != 2 {
		t.Fatalf("999: %+v", a.sets)
	}
	if len(a.acks) != 0 {
		t.Errorf("the 999 was acknowledged: %+v", a.acks)
	}
	for i, e := range a.sets[0].Effects {
		f := b.sets[0].Effects[i]
		if e.Kind != KindAckReceived || e.Key != f.Key || e.Hash != f.Hash {
			t.Errorf("effect %d: %s %s, re-sent %s %s", i, e.Key, e.Hash, f.Key, f.Hash)
		}
		if strings.Contains(e.Key, "PCN") {
			t.Errorf("key names the context: %s", e.Key)
		}
	}
	var ev AckReceivedEvent
	json.Unmarshal(a.sets[0].Effects[1].Payload, &ev)
	if ev.Verdict != "rejected" || ev.GroupVerdict != "partially_accepted" || len(ev.Errors) != 1 ||
		ev.Errors[0].Context[0].Reference != "PCN-2" || ev.Acknowledges.SetControlNumber != "0002" {
		t.Errorf("second event %+v", ev)
	}
}

const claimAck277 = "ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *261130*1000*^*00501*000000703*0*P*:~" +
	"GS*HN*CLEARING*RIVERSIDE*20261130*1000*703*X*005010X214~ST*277*0001*005010X214~BHT*0085*08*B1*20261130*1000*TH~" +
	"HL*1**20*1~NM1*AY*2*CLEARING*****46*CH1~TRN*1*B1~DTP*050*D8*20261130~DTP*009*D8*20261130~" +
	"HL*2*1*21*0~NM1*41*2*RIVERSIDE*****46*RS1~TRN*2*BATCH~STC*A3:24:41*20261130*U~QTY*AA*2~" +
	"SE*13*0001~GE*1*703~IEA*1*000000703~"

// A 277 gets a 999 only when its source asks (ack_277); its batch-level
// rejection is one claim.status event of level batch.
func TestA277IsAcknowledgedOnlyWhenAsked(t *testing.T) {
	r := run(t, []byte(claimAck277))
	if len(r.acks) != 0 {
		t.Errorf("a 277 was acknowledged by default: %+v", r.acks)
	}
	if len(r.sets) != 1 || len(r.sets[0].Effects) != 1 || r.sets[0].Effects[0].Kind != KindClaimStatus {
		t.Fatalf("277: %+v", r.sets)
	}
	var ev ClaimStatusEvent
	json.Unmarshal(r.sets[0].Effects[0].Payload, &ev)
	if ev.Level != "batch" || ev.Verdict != "rejected" || ev.TraceNumber != "BATCH" {
		t.Errorf("event %+v", ev)
	}
	var acks []Effect
	_, err := File(context.Background(), bytes.NewReader([]byte(claimAck277)),
		Config{ControlNumbers: &ack.MemoryControlNumbers{}, Ack: ack.Options{Now: fixedNow, Ack277: true}},
		func(it Item) error {
			if it.Ack != nil {
				acks = append(acks, *it.Ack)
			}
			return nil
		})
	if err != nil || len(acks) != 1 || acks[0].Kind != KindAck999 {
		t.Errorf("with ack_277: %v %+v", err, acks)
	}
}

// A group of 999 sets is never acknowledged, even when its GS01 is not
// FA (a partner's mistake must not start two systems acknowledging each
// other's acknowledgments).
func TestA999GroupWithAnotherGS01IsNotAcknowledged(t *testing.T) {
	body := "AK2*837*0001*005010X222A1~IK5*A~"
	text := strings.Replace(string(fix999(ack999("7003", body, "0"))), "GS*FA*", "GS*HC*", 1)
	r := run(t, []byte(text))
	if len(r.acks) != 0 {
		t.Errorf("acknowledged: %+v", r.acks)
	}
	if len(r.sets) != 1 || len(r.sets[0].Effects) != 1 || r.sets[0].Effects[0].Kind != KindAckReceived {
		t.Errorf("sets %+v", r.sets)
	}
}

// TestCorpusAnswers: the corpus's 999s, TA1s and 277CAs give the events
// their SOURCES.md verdicts call for: one per AK2 loop, TA1 segment or
// claim status of a valid envelope, none for a malformed one (a wrong SE01
// or IEA02, a TA1 with a 4-digit TA101, an IEA01 counting a group that is
// not there), which is rejected like any set.
func TestCorpusAnswers(t *testing.T) {
	dir := testenv.Corpus(t)
	for name, want := range map[string][2]int{ // ack.received, claim.status
		"imsweb-x12-parser/x12_277CA_rejected.txt":                                {0, 2},
		"imsweb-x12-parser/x12_999_accepted.txt":                                  {0, 0},
		"imsweb-x12-parser/x12_999_rejected.txt":                                  {1, 0},
		"nirmitee-clearinghouse-simulator/EXAMPLECLINI.20260830165653.999":        {0, 0},
		"nirmitee-clearinghouse-simulator/EXAMPLECLINI.20260830165653.CLP.277":    {0, 0},
		"oopfactory-x12parser/DHS_Wisconsin_Sample.txt":                           {3, 0},
		"oopfactory-x12parser/TechnicalAcknowledgment_SampleFromJeffN825.txt":     {1, 0},
		"oopfactory-x12parser/TechnicalAcknowledgment_Sample1.txt":                {0, 0},
		"pyx12/834_ls_le_ls_5010.999.txt":                                         {1, 0},
		"pyx12/834_lui_id_5010.999.txt":                                           {4, 0},
		"staedi/invalid999.edi":                                                   {0, 0},
		"staedi/simple999.edi":                                                    {3, 0},
		"staedi/x12_interchange_ack.txt":                                          {0, 0},
		"stupidedi/999-X231A1-response-to-functional-group-containing-3-837s.edi": {3, 0},
		"uhin-x12-parser-library/TA1.edi":                                         {0, 0},
	} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, data)
		var got [2]int
		for _, it := range r.items {
			if it.Received != nil {
				got[0]++
			}
			if it.Set != nil {
				for _, e := range it.Set.Effects {
					switch e.Kind {
					case KindAckReceived:
						got[0]++
					case KindClaimStatus:
						got[1]++
					}
				}
			}
		}
		if got != want {
			t.Errorf("%s: %d ack.received and %d claim.status, want %v", name, got[0], got[1], want)
		}
		if len(r.acks) != 0 {
			t.Errorf("%s: acknowledged: %d", name, len(r.acks))
		}
	}
}
