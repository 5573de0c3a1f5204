package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// failOnce answers 503 to the first delivery of every effect, then 200,
// and keeps the CloudEvent types it accepted.
type failOnce struct {
	mu    sync.Mutex
	seen  map[string]int
	types map[string]int
}

func (f *failOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev struct {
		Type string `json:"type"`
	}
	json.Unmarshal(body, &ev)
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	f.seen[key]++
	if f.seen[key] == 1 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	f.types[ev.Type]++
}

// TestDaemonReceivedAcknowledgmentsLogNoPatientData: a running daemon
// takes a 999 with CTX context naming a patient control number and 277CAs
// naming patients (the corpus's and a generated one) from its drop,
// delivers their events after a failed first attempt each (so every key
// is logged), answers none of them with a 999, and its logs, at debug level,
// hold no patient name, member id or patient control number.
func TestDaemonReceivedAcknowledgmentsLogNoPatientData(t *testing.T) {
	rec := &failOnce{seen: map[string]int{}, types: map[string]int{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	drop := t.TempDir()
	dbPath := filepath.Join(t.TempDir(), "e.db")
	cfgPath := filepath.Join(t.TempDir(), "ediwatch.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`store: {driver: sqlite, dsn: %q}
sources:
  - {name: drop, type: local, directories: [%q], poll_interval: 200ms, stable_for: 0s}
sinks:
  ledger: {url: %q}
  acks: {url: %q}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: acks, ack.ta1: acks, ack.received: acks, claim.status: ledger}
relay: {backoff: {base: 100ms, max: 200ms}}
http: {listen: "127.0.0.1:0"}
log: {level: debug}
`, "file:"+dbPath, drop, srv.URL, srv.URL)), 0o600)
	isa := "ISA*00*          *00*          *ZZ*CLEARING       *ZZ*RIVERSIDE      *261130*1000*^*00501*%09d*1*P*:~"
	files := map[string]string{
		"a.999": fmt.Sprintf(isa, 801) + "GS*FA*CLEARING*RIVERSIDE*20261130*1000*801*X*005010X231A1~ST*999*0001*005010X231A1~" +
			"AK1*HC*41*005010X222A1~AK2*837*0001*005010X222A1~IK3*NM1*7*2010BA*8~CTX*CLM01:PCNSECRET7~IK4*9*67*7*MBRSECRET9~" +
			"IK5*R*5~AK9*R*1*1*0~SE*9*0001~GE*1*801~IEA*1*000000801~",
		"b.277": fmt.Sprintf(isa, 802) + "GS*HN*CLEARING*RIVERSIDE*20261130*1000*802*X*005010X214~ST*277*0001*005010X214~" +
			"BHT*0085*08*B1*20261130*1000*TH~HL*1**20*1~NM1*AY*2*CLEARING*****46*CH1~TRN*1*B1~DTP*050*D8*20261130~" +
			"DTP*009*D8*20261130~HL*2*1*21*1~NM1*41*2*RIVERSIDE*****46*RS1~TRN*2*BATCH~STC*A1:19:PR*20261130*WQ*10.00~" +
			"HL*3*2*19*1~NM1*85*2*RIVERSIDE CLINIC*****XX*1234567893~TRN*1*P1~HL*4*3*PT~" +
			"NM1*QC*1*ZEBEDEE*QUINTANA****MI*MBRSECRET9~TRN*2*PCNSECRET7~STC*A7:21:85*20261130*U*10.00~" +
			"SE*19*0001~GE*1*802~IEA*1*000000802~",
	}
	corpus, _ := os.ReadFile(filepath.Join("..", "..", "internal", "envelope", "testdata", "corpus", "imsweb-x12-parser",
		"x12_277CA_rejected.txt"))
	files["c.277"] = string(corpus)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(drop, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd, logs := startDaemon(t, cfgPath)
	// a.999: one ack.received; b.277: a batch and a claim status; c.277:
	// a batch and a claim status.
	defer func() {
		if t.Failed() {
			t.Logf("types %v\nlogs:\n%s", rec.types, logs.String())
		}
	}()
	waitFor(t, "the events delivered", 30*time.Second, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		// The 277's TA1 too: stopping before its retry lands would lose
		// it from the count below.
		return rec.types["ediwatch.ack.received"] == 1 && rec.types["ediwatch.claim.status"] == 4 &&
			rec.types["ediwatch.ack.ta1"] >= 1
	})
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// ISA14 asks for a TA1 on both interchanges: the 277's gets it (the
	// partner asked), the 999's does not; no 999 answers either.
	if rec.types["ediwatch.ack.999"] != 0 || rec.types["ediwatch.ack.ta1"] != 1 {
		t.Errorf("acknowledgments: %v, want one TA1 (the 277's)", rec.types)
	}
	if !strings.Contains(logs.String(), "claim.status:sha256:") || !strings.Contains(logs.String(), "ackrcv:") {
		t.Errorf("no delivery of the new kinds logged:\n%s", logs.String())
	}
	for _, phi := range []string{"PCNSECRET7", "MBRSECRET9", "ZEBEDEE", "QUINTANA", "3920394930203", "CLILNAME", "XX99999X"} {
		if strings.Contains(logs.String(), phi) {
			t.Errorf("the daemon's logs hold %q", phi)
		}
	}
}
