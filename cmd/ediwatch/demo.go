package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/sftpserver"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

func newDemoCmd(stdout, stderr io.Writer) *cobra.Command {
	var serve bool
	cmd := &cobra.Command{
		Use:   "demo [--serve]",
		Short: "Run the whole pipeline on embedded defaults and print what it did",
		Long: `demo starts an SFTP server on 127.0.0.1 serving a drop of generated 835s and
837s, with the re-deliveries real drops see: the same 835 under three names,
copies landing together, a regenerated 835 with new control numbers and the
same check, a malformed 835 and a file that is not X12, an 835 sent as an
OpenPGP message (encrypted to our key, signed by the partner's, both made at
run time), and the partner's answers to an 837: a 999 accepting it and a
277CA rejecting one of its three claims. It runs the real
daemon (the code of ediwatch run) on a SQLite store in a temporary directory,
delivering to an in-process receiver that checks signatures and dedupes by
Idempotency-Key, and uploading every acknowledgment it sends to the
partner's SFTP inbound folder on the same server as well (an sftp sink:
encrypted to the partner and signed, temporary name, then renamed into place), then prints what happened. Nothing to install, nothing left
behind. --serve keeps it running with /metrics on 127.0.0.1:9464.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sum, err := runDemo(cmd.Context(), serve, stderr)
			if err != nil {
				return err
			}
			return sum.print(stdout)
		},
	}
	cmd.Flags().BoolVar(&serve, "serve", false, "keep running with /metrics up until interrupted")
	return cmd
}

// demoSummary is what the demo did.
type demoSummary struct {
	Files, Sets                                                    int
	Processed, Duplicates, BusinessDuplicates, Conflicts, Rejected int
	PaymentsPosted, ClaimsPosted, Acks999, AcksTA1                 int
	AcksReceived, ClaimStatuses, ClaimsRejected, SFTPFiles         int
	Requests, BadSignatures, DLQ                                   int
	Elapsed                                                        time.Duration
}

func (s *demoSummary) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ediwatch demo: %d files from one SFTP drop, %s\n\n", s.Files, s.Elapsed.Round(time.Millisecond))
	for _, row := range []struct {
		k string
		v int
	}{
		{"files ingested", s.Files}, {"transaction sets", s.Sets}, {"  processed", s.Processed},
		{"  duplicates (same document again)", s.Duplicates},
		{"  business duplicates (regenerated, same payment)", s.BusinessDuplicates},
		{"  key conflicts", s.Conflicts}, {"  rejected (malformed, not X12)", s.Rejected},
		{"payments posted (one per real payment)", s.PaymentsPosted}, {"claims posted", s.ClaimsPosted},
		{"999 acknowledgments sent", s.Acks999}, {"TA1 acknowledgments sent", s.AcksTA1},
		{"  uploaded to the partner's SFTP /inbound", s.SFTPFiles},
		{"partner's 999s received (ack.received)", s.AcksReceived},
		{"claim statuses received (batch and claims)", s.ClaimStatuses}, {"  claims rejected", s.ClaimsRejected},
		{"HTTP requests to the receiver", s.Requests}, {"requests with a bad signature", s.BadSignatures},
		{"dead-letter queue depth", s.DLQ},
	} {
		fmt.Fprintf(tw, "  %s\t%d\n", row.k, row.v)
	}
	return tw.Flush()
}

const demoSecret = "whsec_ZWRpd2F0Y2gtZGVtby1zZWNyZXQta2V5LTEyMw=="

// demoReceiver stands in for the ledger and the acknowledgment gateway: it
// checks signatures and keeps one effect per Idempotency-Key.
type demoReceiver struct {
	mu       sync.Mutex
	requests int
	badSig   int
	effects  map[string]string // Idempotency-Key -> event type
	rejected int               // claim.status events with verdict rejected
}

func (d *demoReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Verdict string `json:"verdict"`
		} `json:"data"`
	}
	json.Unmarshal(body, &ev)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests++
	if r.Header.Get("webhook-signature") != "" && !sink.Verify(demoSecret, r.Header, body) {
		d.badSig++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if _, seen := d.effects[key]; !seen && ev.Type == "ediwatch.claim.status" && ev.Data.Verdict == "rejected" {
		d.rejected++
	}
	d.effects[key] = ev.Type
	w.WriteHeader(http.StatusAccepted)
}

func (d *demoReceiver) count(typ string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, t := range d.effects {
		if t == typ {
			n++
		}
	}
	return n
}

// demoFiles writes the drop: five payments, the first re-sent under two
// more names, the second copied alongside itself, the third regenerated
// under new control numbers, a malformed 835, a file that is not X12, a
// sixth payment as an OpenPGP message, an 837 of three claims, and the partner's answers to it: a 999 accepting
// it and a 277CA accepting two of its claims and rejecting the third.
func demoFiles(drop string, keys *demoKeys) (int, error) {
	write := func(name string, b []byte) error { return os.WriteFile(filepath.Join(drop, name), b, 0o644) }
	remit := func(ctl int, trace string) []byte {
		var b bytes.Buffer
		x12gen.Remit{Control: ctl, Trace: trace, ClaimsPerSet: 3, LinesPerClaim: 2, EOL: "\n"}.Write(&b)
		return b.Bytes()
	}
	var payments [][]byte
	for i := 0; i < 5; i++ {
		p := remit(1001+i, fmt.Sprintf("DEMO%d-", i))
		payments = append(payments, p)
		if err := write(fmt.Sprintf("era-%d.835", 1001+i), p); err != nil {
			return 0, err
		}
	}
	var claims bytes.Buffer
	x12gen.Claims{Control: 7001, Claims: 3, EOL: "\n"}.Write(&claims)
	malformed := regexp.MustCompile(`SE\*\d+\*`).ReplaceAll(remit(3001, "DEMOBAD-"), []byte("SE*999*"))
	files := []struct {
		name string
		data []byte
	}{
		{"era-1001-resent.835", payments[0]},
		{"ERA_1001_COPY.x12", payments[0]},
		{"era-1002-dup.835", payments[1]},
		{"era-2003-regenerated.835", remit(2003, "DEMO2-")},
		{"era-3001-malformed.835", malformed},
		{"scan-noise.edi", []byte("%PDF-1.4 this is a scanned remittance, not X12\n")},
		{"claims-7001.x12", claims.Bytes()},
		{"ack-7001.999", []byte(demoAnswer(9001, "FA", "005010X231A1", "999", []string{
			"AK1*HC*7001*005010X222A1", "AK2*837*0001*005010X222A1", "IK5*A", "AK9*A*1*1*1"}))},
		{"status-7001.277", []byte(demoAnswer(9002, "HN", "005010X214", "277", demoStatuses()))},
	}
	// A sixth payment as the partner sends it to a source with decrypt:
	// encrypted to our key and signed with theirs, under a name that does
	// not say so (it is recognised by content).
	sealed, err := keys.seal(remit(1006, "DEMO5-"))
	if err != nil {
		return 0, err
	}
	files = append(files, struct {
		name string
		data []byte
	}{"era-1006.835", sealed})
	for _, f := range files {
		if err := write(f.name, f.data); err != nil {
			return 0, err
		}
	}
	return 5 + len(files), nil
}

// demoKeys are the demo's OpenPGP keys, made at run time with go-crypto
// (no gpg needed): ours, which the partner encrypts to and we sign with,
// and the partner's, which signs what it sends and receives what we send.
type demoKeys struct {
	us, partner *openpgp.Entity
	// Files for the configuration: our private key, the partner's public
	// key.
	ourKey, partnerKey string
}

func newDemoKeys(dir string) (*demoKeys, error) {
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	us, err := openpgp.NewEntity("Riverside Clinic", "demo", "edi@riverside.example", cfg)
	if err != nil {
		return nil, err
	}
	partner, err := openpgp.NewEntity("Acme Health Plan", "demo", "edi@acme.example", cfg)
	if err != nil {
		return nil, err
	}
	k := &demoKeys{us: us, partner: partner, ourKey: filepath.Join(dir, "riverside.gpg"),
		partnerKey: filepath.Join(dir, "acme.pub.gpg")}
	var ours, theirs bytes.Buffer
	if err := us.SerializePrivate(&ours, nil); err != nil {
		return nil, err
	}
	if err := partner.Serialize(&theirs); err != nil {
		return nil, err
	}
	if err := os.WriteFile(k.ourKey, ours.Bytes(), 0o600); err != nil {
		return nil, err
	}
	return k, os.WriteFile(k.partnerKey, theirs.Bytes(), 0o600)
}

// seal encrypts b to us, signed by the partner, ASCII-armored.
func (k *demoKeys) seal(b []byte) ([]byte, error) {
	var out bytes.Buffer
	aw, err := armor.Encode(&out, "PGP MESSAGE", nil)
	if err != nil {
		return nil, err
	}
	w, err := openpgp.Encrypt(aw, openpgp.EntityList{k.us}, k.partner, nil, nil)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if err := aw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// demoAnswer is one interchange from the partner (ACMEHP) to us
// (RIVERSIDE) holding one set of type typ with the segments body.
func demoAnswer(control int, functional, version, typ string, body []string) string {
	segs := []string{
		fmt.Sprintf("ISA*00*          *00*          *ZZ*ACMEHP         *ZZ*RIVERSIDE      *261130*1000*^*00501*%09d*0*P*:", control),
		fmt.Sprintf("GS*%s*ACMEHP*RIVERSIDE*20261130*1000*%d*X*%s", functional, control, version),
		fmt.Sprintf("ST*%s*0001*%s", typ, version),
	}
	segs = append(segs, body...)
	segs = append(segs, fmt.Sprintf("SE*%d*0001", len(body)+2), fmt.Sprintf("GE*1*%d", control),
		fmt.Sprintf("IEA*1*%09d", control))
	return strings.Join(segs, "~\n") + "~\n"
}

// demoStatuses is the body of a 277CA answering the demo's 837: its batch
// accepted, claims CLAIM1 and CLAIM2 accepted, CLAIM3 rejected.
func demoStatuses() []string {
	segs := []string{"BHT*0085*08*B7001*20261130*1000*TH",
		"HL*1**20*1", "NM1*AY*2*ACME HEALTH PLAN*****46*66783JJT", "TRN*1*B7001", "DTP*050*D8*20261130", "DTP*009*D8*20261130",
		"HL*2*1*21*1", "NM1*41*2*RIVERSIDE CLINIC*****46*TGJ23", "TRN*2*7001", "STC*A1:19:PR*20261130*WQ*450.00",
		"HL*3*2*19*1", "NM1*85*2*RIVERSIDE CLINIC*****XX*1234567893", "TRN*1*7001"}
	for i, stc := range []string{"A2:20:PR*20261130*WQ*150.00", "A2:20:PR*20261130*WQ*150.00", "A7:562:85*20261130*U*150.00"} {
		segs = append(segs, fmt.Sprintf("HL*%d*3*PT", 4+i), "NM1*QC*1*PATIENT*TEST****MI*MBR000001",
			fmt.Sprintf("TRN*2*CLAIM%d", i+1), "STC*"+stc, "DTP*472*D8*20261101")
	}
	return segs
}

// runDemo runs the demo and returns its summary. Logs at warn and above go
// to logw.
func runDemo(ctx context.Context, serve bool, logw io.Writer) (*demoSummary, error) {
	start := time.Now()
	tmp, err := os.MkdirTemp("", "ediwatch-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	drop, archive := filepath.Join(tmp, "outbound", "835"), filepath.Join(tmp, "outbound", "archive")
	inbound := filepath.Join(tmp, "inbound") // the partner's, for our acknowledgments
	for _, d := range []string{drop, inbound} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	keys, err := newDemoKeys(tmp)
	if err != nil {
		return nil, fmt.Errorf("demo keys: %w", err)
	}
	nfiles, err := demoFiles(drop, keys)
	if err != nil {
		return nil, err
	}
	srv, err := sftpserver.Start(tmp)
	if err != nil {
		return nil, fmt.Errorf("sftp server: %w", err)
	}
	defer srv.Close()
	rec := &demoReceiver{effects: map[string]string{}}
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rsrv := &http.Server{Handler: rec, ReadHeaderTimeout: 5 * time.Second}
	go rsrv.Serve(rln)
	defer rsrv.Close()
	secretFile := filepath.Join(tmp, "ledger_secret")
	if err := os.WriteFile(secretFile, []byte(demoSecret+"\n"), 0o600); err != nil {
		return nil, err
	}
	listen := "127.0.0.1:0"
	if serve {
		listen = "127.0.0.1:9464"
	}
	cfgPath := filepath.Join(tmp, "ediwatch.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`store: {driver: sqlite, dsn: %q}
sources:
  - name: acme-era
    type: sftp
    address: %q
    user: riverside
    private_key_file: %q
    known_hosts_file: %q
    directories: [%q]
    include: ["*.835", "*.x12", "*.edi", "*.999", "*.277"]
    poll_interval: 200ms
    stable_for: 0s
    after: "move:%s"
    us: "ZZ:RIVERSIDE"
    them: "ZZ:ACMEHP"
    # No verify_key_file: it would refuse the demo's plaintext files
    # (unsigned); era-1006.835 is signed all the same.
    decrypt: {private_key_file: %q}
sinks:
  ledger: {url: "http://%s/remittances", secret_file: %q}
  acks: {url: "http://%s/acks"}
  partner:
    type: sftp
    address: %q
    user: riverside
    private_key_file: %q
    known_hosts_file: %q
    directory: %q
    encrypt_to: %q
    sign_with: {private_key_file: %q}
routes:
  payment.posted: ledger
  claim.received: ledger
  ack.999: [acks, partner]
  ack.ta1: [acks, partner]
  ack.received: acks
  claim.status: ledger
http: {listen: %q}
log: {level: warn}
`, "file:"+filepath.Join(tmp, "ediwatch.db"), srv.Addr, srv.KeyFile, srv.KnownHosts, drop, archive,
		keys.ourKey, rln.Addr(), secretFile, rln.Addr(), srv.Addr, srv.KeyFile, srv.KnownHosts, inbound,
		keys.partnerKey, keys.ourKey, listen)), 0o600); err != nil {
		return nil, err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	log, err := newLogger(cfg.Log.Level, logw)
	if err != nil {
		return nil, err
	}
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	started := make(chan *daemon, 1)
	done := make(chan error, 1)
	go func() { done <- runDaemon(dctx, cfg, log, func(d *daemon) { started <- d }) }()
	var d *daemon
	select {
	case d = <-started:
	case err := <-done:
		return nil, err
	}
	// 6 payments (one of them sent encrypted), 3 claims, 9 999s and 1 TA1,
	// 1 received 999 and 4 claim statuses (the batch's and three claims');
	// the 9 999s and the TA1 also as files, encrypted to the partner.
	const want, wantFiles = 24, 10
	deadline := time.Now().Add(12 * time.Second)
	var c store.Counts
	for {
		c, err = d.store.Counts(ctx)
		if err != nil {
			return nil, err
		}
		rec.mu.Lock()
		got := len(rec.effects)
		rec.mu.Unlock()
		if c.Files["ingested"]+c.Files["rejected"] == nfiles && c.Outbox["pending"]+c.Outbox["inflight"] == 0 && got >= want &&
			demoUploaded(inbound, keys) >= wantFiles {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if serve {
		fmt.Fprintf(logw, "demo serving /metrics on http://%s/metrics until interrupted\n", d.addr)
		<-ctx.Done()
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	rec.mu.Lock()
	requests, bad := rec.requests, rec.badSig
	rec.mu.Unlock()
	sum := &demoSummary{
		// A business duplicate is a claimed inbox row too; sightings add the
		// copies that claimed nothing.
		Files: c.Files["ingested"] + c.Files["rejected"], Sets: c.Inbox["processed"] + c.Inbox["rejected"] +
			c.Sightings["duplicate"] + c.Sightings["conflict"],
		Processed: c.Inbox["processed"] - c.Sightings["business_duplicate"], Duplicates: c.Sightings["duplicate"],
		BusinessDuplicates: c.Sightings["business_duplicate"], Conflicts: c.Sightings["conflict"], Rejected: c.Inbox["rejected"],
		PaymentsPosted: rec.count("ediwatch.payment.posted"), ClaimsPosted: rec.count("ediwatch.claim.received"),
		Acks999: rec.count("ediwatch.ack.999"), AcksTA1: rec.count("ediwatch.ack.ta1"),
		AcksReceived: rec.count("ediwatch.ack.received"), ClaimStatuses: rec.count("ediwatch.claim.status"),
		ClaimsRejected: rec.rejected, SFTPFiles: demoUploaded(inbound, keys),
		Requests: requests, BadSignatures: bad, DLQ: c.Outbox["dead"], Elapsed: time.Since(start),
	}
	return sum, nil
}

// demoUploaded counts the acknowledgments in the partner's inbound folder:
// files in place under their final names (none left under a temporary
// one), each an OpenPGP message the partner's key opens to X12 and whose
// signature is ours.
func demoUploaded(dir string, keys *demoKeys) int {
	es, _ := os.ReadDir(dir)
	n := 0
	for _, e := range es {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".x12") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		md, err := openpgp.ReadMessage(bytes.NewReader(b), openpgp.EntityList{keys.partner, keys.us}, nil, nil)
		if err != nil || md.SignedBy == nil || md.SignedBy.Entity != keys.us {
			continue
		}
		plain, err := io.ReadAll(md.UnverifiedBody)
		if err == nil && md.SignatureError == nil && bytes.HasPrefix(plain, []byte("ISA")) {
			n++
		}
	}
	return n
}
