package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// answerRoutes routes the received acknowledgments too.
var answerRoutes = map[string][]string{
	process.KindPayment: {"ledger"}, process.KindClaim: {"ledger"}, process.KindAck999: {"acks"}, process.KindAckTA1: {"acks"},
	process.KindAckReceived: {"acks"}, process.KindClaimStatus: {"ledger"},
}

// answer999 is the clearinghouse's 999 accepting the 837 that
// x12gen.Claims{Control: 41} sends, under interchange and group control
// number ctl and set control number st.
func answer999(ctl int, st string) []byte {
	body := []string{"ST*999*" + st + "*005010X231A1", "AK1*HC*41*005010X222A1", "AK2*837*0001*005010X222A1",
		"IK5*A", "AK9*A*1*1*1"}
	return envelopeOf(ctl, "FA", "005010X231A1", body)
}

// answer277 is the clearinghouse's 277CA accepting claim PCN-1 and
// rejecting PCN-2 of that 837.
func answer277(ctl int) []byte {
	body := []string{"ST*277*0001*005010X214", "BHT*0085*08*B1*20261130*1000*TH",
		"HL*1**20*1", "NM1*AY*2*CLEARING*****46*CH1", "TRN*1*B1", "DTP*050*D8*20261130", "DTP*009*D8*20261130",
		"HL*2*1*21*1", "NM1*41*2*RIVERSIDE CLINIC*****46*TGJ23", "TRN*2*41", "STC*A1:19:PR*20261130*WQ*300.00",
		"QTY*90*1", "QTY*AA*1", "AMT*YU*150.00", "AMT*YY*150.00",
		"HL*3*2*19*1", "NM1*85*2*RIVERSIDE CLINIC*****XX*1234567893", "TRN*1*P1",
		"HL*4*3*PT", "NM1*QC*1*PATIENT*TEST****MI*MBR000001", "TRN*2*PCN-1", "STC*A2:20*20261130*WQ*150.00",
		"REF*1K*PAYER-1", "DTP*472*D8*20261101",
		"HL*5*3*PT", "NM1*QC*1*PATIENT*TEST****MI*MBR000001", "TRN*2*PCN-2", "STC*A7:21:85*20261130*U*150.00",
		"REF*D9*CH-2", "DTP*472*D8*20261101"}
	return envelopeOf(ctl, "HN", "005010X214", body)
}

func envelopeOf(ctl int, fid, version string, body []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *261130*1000*^*00501*%09d*0*P*:~", ctl)
	fmt.Fprintf(&b, "GS*%s*CLEARING*RIVERSIDE*20261130*1000*%d*X*%s~", fid, ctl, version)
	for _, s := range body {
		b.WriteString(s + "~")
	}
	st := strings.Split(body[0], "*")[2]
	fmt.Fprintf(&b, "SE*%d*%s~GE*1*%d~IEA*1*%09d~", len(body)+1, st, ctl, ctl)
	return []byte(b.String())
}

type events struct {
	mu  sync.Mutex
	got map[string][]map[string]any // by CloudEvent type
	n   map[string]int              // deliveries by Idempotency-Key
}

func (e *events) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got[ev.Type] = append(e.got[ev.Type], ev.Data)
	e.n[r.Header.Get("Idempotency-Key")]++
}

func ingestAnswer(t *testing.T, s store.Store, path string, data []byte) *inbox.Report {
	t.Helper()
	r, err := inbox.Ingest(context.Background(), inbox.Options{Store: s, Routes: answerRoutes},
		inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: time.Now(), SHA256: "sha-" + path,
			CorrelationID: store.NewCorrelationID(), Now: time.Now().UTC()}, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ingest %s: %v", path, err)
	}
	return r
}

// deliverAll runs a relay over s until nothing is left to deliver.
func deliverAll(t *testing.T, s store.Store, url string) {
	t.Helper()
	sinks := map[string]outbox.Deliverer{}
	for _, name := range []string{"acks", "ledger"} {
		d, err := sink.New(sink.Config{Name: name, URL: url, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		sinks[name] = d
	}
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Lease: time.Minute}, s, sinks, zap.NewNop(),
		metrics.New(prometheus.NewRegistry()))
	for i := 0; i < 20; i++ {
		n, err := r.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the relay never ran dry")
}

// TestReceivedAcknowledgmentsBecomeEventsNamingOriginals: an 837 passes
// through ediwatch, then the clearinghouse's 999 and 277CA answering it:
// they are delivered as ack.received and claim.status events naming the
// 837's set key and the claims' effect keys, and a TA1 answering its
// interchange names that; no 999 answers them; the 999 and the TA1
// re-sent under new control numbers are business duplicates, delivered
// once.
func TestReceivedAcknowledgmentsBecomeEventsNamingOriginals(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, s store.Store) {
		rec := &events{got: map[string][]map[string]any{}, n: map[string]int{}}
		srv := httptest.NewServer(rec)
		defer srv.Close()

		var claims bytes.Buffer
		x12gen.Claims{Sender: "RIVERSIDE", Receiver: "CLEARING", Control: 41, Claims: 2, IDPrefix: "PCN-"}.Write(&claims)
		r837 := ingestAnswer(t, s, "out.837", claims.Bytes())
		if len(r837.Sets) != 1 || r837.Sets[0].Outcome != inbox.Processed || len(r837.Sets[0].EffectKeys) != 2 {
			t.Fatalf("837: %+v", r837.Sets)
		}
		setKey := r837.Sets[0].Key
		claimKeys := r837.Sets[0].EffectKeys

		r999 := ingestAnswer(t, s, "a.999", answer999(700, "0001"))
		if len(r999.Sets) != 1 || r999.Sets[0].Outcome != inbox.Processed || len(r999.Sets[0].EffectKeys) != 1 {
			t.Fatalf("999: %+v", r999.Sets)
		}
		if len(r999.AckKeys) != 0 {
			t.Errorf("a 999 was acknowledged: %v", r999.AckKeys)
		}
		r277 := ingestAnswer(t, s, "a.277", answer277(701))
		if len(r277.Sets) != 1 || r277.Sets[0].Outcome != inbox.Processed || len(r277.Sets[0].EffectKeys) != 3 {
			t.Fatalf("277CA: %+v", r277.Sets)
		}
		if len(r277.AckKeys) != 0 {
			t.Errorf("a 277 was acknowledged without ack_277: %v", r277.AckKeys)
		}
		ta1 := func(ctl int) []byte {
			return []byte(fmt.Sprintf("ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      "+
				"*261130*1000*^*00501*%09d*0*P*:~TA1*000000041*261130*0930*A*000~IEA*0*%09d~", ctl, ctl))
		}
		if r := ingestAnswer(t, s, "a.ta1", ta1(703)); len(r.AckKeys) != 1 || !strings.Contains(r.AckKeys[0], ":TA1:000000041:") {
			t.Fatalf("TA1: %+v", r)
		}
		deliverAll(t, s, srv.URL)

		rec.mu.Lock()
		var ta1Events []map[string]any
		for _, ev := range rec.got["ediwatch.ack.received"] {
			if ev["type"] == "TA1" {
				ta1Events = append(ta1Events, ev)
			} else {
				rec.got["999"] = append(rec.got["999"], ev)
			}
		}
		acks := rec.got["999"]
		statuses := rec.got["ediwatch.claim.status"]
		rec.mu.Unlock()
		if len(ta1Events) != 1 || ta1Events[0]["original_key"] != "x12:P:ZZ:RIVERSIDE:ZZ:CLEARING:000000041" ||
			ta1Events[0]["verdict"] != "accepted" {
			t.Errorf("TA1 events %v", ta1Events)
		}
		if len(acks) != 1 || acks[0]["original_key"] != setKey || acks[0]["verdict"] != "accepted" ||
			acks[0]["group_verdict"] != "accepted" || acks[0]["envelope_key"] != r999.Sets[0].Key {
			t.Errorf("ack.received events %v, want one naming %s", acks, setKey)
		}
		byPCN := map[string]map[string]any{}
		for _, ev := range statuses {
			if pcn, ok := ev["patient_control_number"].(string); ok {
				byPCN[pcn] = ev
			} else if ev["level"] != "batch" {
				t.Errorf("status without a claim: %v", ev)
			}
		}
		if len(statuses) != 3 || byPCN["PCN-1"]["verdict"] != "accepted" || byPCN["PCN-2"]["verdict"] != "rejected" {
			t.Fatalf("claim.status events %v", statuses)
		}
		for i, pcn := range []string{"PCN-1", "PCN-2"} {
			if byPCN[pcn]["original_key"] != claimKeys[i] {
				t.Errorf("%s: original_key %v, want the claim's effect key %s", pcn, byPCN[pcn]["original_key"], claimKeys[i])
			}
		}

		// The same 999 under new control numbers: a business duplicate.
		again := ingestAnswer(t, s, "b.999", answer999(702, "0002"))
		if len(again.Sets) != 1 || again.Sets[0].Outcome != inbox.BusinessDuplicate || len(again.AckKeys) != 0 {
			t.Fatalf("re-sent 999: %+v, acks %v", again.Sets, again.AckKeys)
		}
		// The same TA1 in a new interchange: its event exists already.
		if r := ingestAnswer(t, s, "b.ta1", ta1(704)); len(r.AckKeys) != 0 {
			t.Errorf("re-sent TA1 inserted %v", r.AckKeys)
		}
		deliverAll(t, s, srv.URL)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if n := len(rec.got["ediwatch.ack.received"]); n != 2 {
			t.Errorf("%d ack.received deliveries, want 2 (the 999's and the TA1's)", n)
		}
		for k, n := range rec.n {
			if n != 1 {
				t.Errorf("%s delivered %d times", sink.LogKey("", k), n)
			}
		}
	})
}
