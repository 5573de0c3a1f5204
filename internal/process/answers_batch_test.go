package process

import (
	"encoding/json"
	"strings"
	"testing"
)

// provider277 is a 277CA answering the 837 batch whose BHT03 was batch
// (2200B TRN02), with a provider-level status whose trace is "0" (the
// guide leaves 2200C TRN02 to the information source; "0" is common)
// and one claim.
func provider277(ctl, batch string) []byte {
	body := "ST*277*0001*005010X214~BHT*0085*08*" + ctl + "*20261130*1000*TH~" +
		"HL*1**20*1~NM1*PR*2*PAYER*****PI*12345~TRN*1*" + ctl + "~DTP*050*D8*20261130~DTP*009*D8*20261130~" +
		"HL*2*1*21*1~NM1*41*2*RIVERSIDE*****46*RIVERSIDE~TRN*2*" + batch + "~" +
		"HL*3*2*19*1~NM1*85*2*CLINIC*****XX*1234567893~TRN*1*0~STC*A1:19:PR*20261130*WQ*150~QTY*90*1~AMT*YU*150~" +
		"HL*4*3*PT~NM1*QC*1*DOE*JANE****MI*X1~TRN*2*PCN-" + batch + "~STC*A2:20:PR*20261130*WQ*150~"
	n := strings.Count(body, "~") + 1
	return []byte("ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *261130*1000*^*00501*00000" + ctl + "*0*P*:~" +
		"GS*HN*CLEARING*RIVERSIDE*20261130*1000*" + ctl + "*X*005010X214~" + body + "SE*" + itoa(n) + "*0001~" +
		"GE*1*" + ctl + "~IEA*1*00000" + ctl + "~")
}

// Two 277CAs answering two different 837 batches of one provider, with the
// same totals on the same day, give two provider-level claim.status events:
// the batch they answer (2200B TRN02, the 837's BHT03) tells them apart,
// though their provider statuses read alike. The same 277CA re-sent under
// new control numbers still gives the same keys (a business duplicate).
func TestProviderStatusesOfTwoBatchesAreTwoEvents(t *testing.T) {
	a := run(t, provider277("7101", "BATCHA"))
	b := run(t, provider277("7102", "BATCHB"))
	again := run(t, provider277("7103", "BATCHA"))
	provider := func(r result) Effect {
		t.Helper()
		if len(r.sets) != 1 || r.sets[0].Status != Processed || len(r.sets[0].Effects) != 2 {
			t.Fatalf("277: %+v", r.sets)
		}
		var ev ClaimStatusEvent
		e := r.sets[0].Effects[0]
		if err := json.Unmarshal(e.Payload, &ev); err != nil || ev.Level != "provider" {
			t.Fatalf("first effect: %v %s", err, e.Payload)
		}
		return e
	}
	pa, pb, pagain := provider(a), provider(b), provider(again)
	if pa.Key == pb.Key {
		t.Errorf("the provider statuses of two batches share the key %s: the second is taken for a re-sent 277CA", pa.Key)
	}
	if pa.Key != pagain.Key || pa.Hash != pagain.Hash {
		t.Errorf("re-sent: %s, first %s", pagain.Key, pa.Key)
	}
	for i := range a.sets[0].Effects {
		if a.sets[0].Effects[i].Key != again.sets[0].Effects[i].Key {
			t.Errorf("effect %d: re-sent key %s, first %s", i, again.sets[0].Effects[i].Key, a.sets[0].Effects[i].Key)
		}
	}
}

// An interchange of 999s whose group's GS01 is not FA gets no TA1 either,
// though ISA14 asks for one: like its 999, a TA1 would acknowledge an
// acknowledgment.
func TestA999UnderAnotherGS01GetsNoTA1(t *testing.T) {
	body := "AK2*837*0001*005010X222A1~IK5*A~"
	text := strings.Replace(string(fix999(ack999("7004", body, "1"))), "GS*FA*", "GS*HC*", 1)
	r := run(t, []byte(text))
	if len(r.acks) != 0 {
		t.Errorf("acknowledged: %+v", r.acks)
	}
	if len(r.sets) != 1 || len(r.sets[0].Effects) != 1 || r.sets[0].Effects[0].Kind != KindAckReceived {
		t.Errorf("sets %+v", r.sets)
	}
}

// A 277CA whose ST03 is left out (optional in the X12 standard) is known
// by its group's GS08: its claim statuses are events, not dropped.
func TestA277CAWithoutST03IsKnownByItsGS08(t *testing.T) {
	text := strings.Replace(string(provider277("7105", "BATCHC")), "ST*277*0001*005010X214~", "ST*277*0001~", 1)
	r := run(t, []byte(text))
	if len(r.acks) != 0 {
		t.Errorf("acknowledged: %+v", r.acks)
	}
	if len(r.sets) != 1 || r.sets[0].Status != Processed || len(r.sets[0].Effects) != 2 ||
		r.sets[0].Effects[1].Kind != KindClaimStatus {
		t.Fatalf("277 without ST03: %+v", r.sets)
	}
}
