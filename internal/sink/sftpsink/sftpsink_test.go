package sftpsink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	psftp "github.com/ediwatch/ediwatch/internal/poller/sftp"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/sink/sftpsink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// folder returns a directory of the test sshd's drop the SFTP user may
// write to (the server sees it at the same path).
func folder(t *testing.T, sshd testenv.SSHD) string {
	t.Helper()
	d, err := os.MkdirTemp(sshd.Drop, "sink-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o777)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// newSink returns an SFTP sink writing to dir on the test sshd (through
// address when set, e.g. a proxy).
func newSink(t *testing.T, sshd testenv.SSHD, address, dir string, edit func(*sftpsink.Config)) *sftpsink.SFTP {
	t.Helper()
	if address == "" {
		address = sshd.Addr
	}
	cfg := sftpsink.Config{Name: "partner", Directory: dir, Timeout: 10 * time.Second,
		Conn: psftp.Config{Address: address, User: sshd.User, PrivateKeyFile: sshd.KeyFile,
			KnownHostsFile: sshd.KnownHosts, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}}
	if edit != nil {
		edit(&cfg)
	}
	s, err := sftpsink.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// files lists the names in dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// ingest records data under routes, stamped t0.
func ingest(t *testing.T, st store.Store, routes map[string][]string, path string, data []byte) *inbox.Report {
	t.Helper()
	r, err := inbox.Ingest(context.Background(), inbox.Options{Store: st, Routes: routes},
		inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: t0, SHA256: "sha-" + path,
			CorrelationID: store.NewCorrelationID(), Now: t0}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// relay returns a relay over st and a function running one round of it
// (the clock then moves an hour on, past any backoff).
func relay(t *testing.T, st store.Store, sinks map[string]outbox.Deliverer, maxAttempts int) func() {
	cfg := outbox.RelayConfig{Workers: 2, MaxAttempts: maxAttempts, BackoffBase: time.Second, BackoffMax: time.Minute,
		MaxAge: 72 * time.Hour, Lease: time.Minute}
	r := outbox.NewRelay(cfg, st, sinks, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	clock := t0.Add(time.Second)
	r.SetClock(func() time.Time { return clock })
	return func() {
		t.Helper()
		if _, err := r.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Hour)
	}
}

// rowsOf returns the outbox rows of kind.
func rowsOf(t *testing.T, st store.Store, kind string) []outbox.Row {
	t.Helper()
	var out []outbox.Row
	for id := int64(1); id < 100; id++ {
		if row, err := st.GetOutbox(context.Background(), id); err == nil && row.Kind == kind {
			out = append(out, row)
		}
	}
	return out
}

func x12Of(t *testing.T, row outbox.Row) string {
	var a struct {
		X12 string `json:"x12"`
	}
	if err := json.Unmarshal(row.Payload, &a); err != nil || a.X12 == "" {
		t.Fatalf("payload of %s: %v", row.EffectKey, err)
	}
	return a.X12
}

func remit(control int, trace string) []byte {
	var b bytes.Buffer
	x12gen.Remit{Control: control, Trace: trace}.Write(&b)
	return b.Bytes()
}

// TestUploadIsRenamedIntoPlace: through the relay, an 835's 999 lands in
// the partner's folder as its raw X12 under the default name and its
// payment as a CloudEvents JSON file, with no temporary file left; a
// second delivery of the same 999 (a retry after a crash that renamed but
// did not record) replaces the file, leaving one.
func TestUploadIsRenamedIntoPlace(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	dir := folder(t, sshd)
	st := drivertest.SQLite(t)
	routes := map[string][]string{"payment.posted": {"partner"}, "claim.received": {"partner"},
		"ack.999": {"partner"}, "ack.ta1": {"partner"}}
	ingest(t, st, routes, "a.835", remit(7001, "REN"))
	s := newSink(t, sshd, "", dir, nil)
	relay(t, st, map[string]outbox.Deliverer{"partner": s}, 5)()
	acks := rowsOf(t, st, "ack.999")
	if len(acks) != 1 || acks[0].Status != outbox.StatusDelivered {
		t.Fatalf("999 rows %+v", acks)
	}
	x := x12Of(t, acks[0])
	name := "ack.999_RIVERSIDE_" + x[90:99] + ".x12" // ISA06 of our 999 and its ISA13
	got := files(t, dir)
	if len(got) != 2 || got[0] != name || !strings.HasPrefix(got[1], "payment.posted_") || !strings.HasSuffix(got[1], ".json") {
		t.Fatalf("files %v, want %s and a payment event", got, name)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != x {
		t.Errorf("999 file %q, want the row's X12 %q", b, x)
	}
	var ev struct {
		SpecVersion, ID, Type string
		Data                  json.RawMessage
	}
	b, _ := os.ReadFile(filepath.Join(dir, got[1]))
	if err := json.Unmarshal(b, &ev); err != nil || ev.SpecVersion != "1.0" || ev.Type != "ediwatch.payment.posted" ||
		!strings.HasPrefix(ev.ID, "payment:") || len(ev.Data) == 0 {
		t.Errorf("payment file %s: %v", b, err)
	}
	// The same delivery again.
	if res := s.Deliver(context.Background(), acks[0].Message(), time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("second delivery: %+v", res)
	}
	if again := files(t, dir); len(again) != 2 || again[0] != name {
		t.Errorf("after the same delivery again: %v", again)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != x {
		t.Errorf("999 file after the second delivery %q", b)
	}
}

// TestRenameFalseWritesTheFinalName: with rename: false (servers without
// RENAME) the final name is written directly, never a temporary one; the
// beginning of the file left there by a cut attempt is completed, and
// another effect's file under the name is left in place.
func TestRenameFalseWritesTheFinalName(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	dir := folder(t, sshd)
	s := newSink(t, sshd, "", dir, func(c *sftpsink.Config) { c.Direct = true; c.Pattern = "{control}-{receiver}.{ext}" })
	msg := ackMessage("000000042")
	name, body, err := sftpsink.FileName("{control}-{receiver}.{ext}", msg)
	if err != nil || name != "000000042-ACMEHP.x12" {
		t.Fatalf("name %q, %v", name, err)
	}
	other := bytes.Repeat([]byte("x"), 4096)
	writeAsPartner(t, filepath.Join(dir, name), other)
	if res := s.Deliver(context.Background(), msg, time.Now()); res.Outcome != sink.Retry {
		t.Fatalf("delivery over another file: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(b, other) {
		t.Fatalf("another file under the name was replaced")
	}
	writeAsPartner(t, filepath.Join(dir, name), body[:len(body)/2])
	if res := s.Deliver(context.Background(), msg, time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("delivery: %+v", res)
	}
	if got := files(t, dir); len(got) != 1 || got[0] != name {
		t.Errorf("files %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(b, body) {
		t.Errorf("file %q, want %q", b, body)
	}
}

// writeAsPartner leaves a file the SFTP user may overwrite, as its own
// earlier attempt would have.
func writeAsPartner(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o666)
}

// ackMessage is an ack.999 message of a 999 with ISA13 control.
func ackMessage(control string) sink.Message {
	x := "ISA*00*          *00*          *ZZ*RIVERSIDE      *ZZ*ACMEHP         *261130*1200*^*00501*" + control +
		"*0*P*:~GS*FA*RIVERSIDE*ACMEHP*20261130*1200*42*X*005010X231A1~ST*999*0001*005010X231A1~" +
		"AK1*HP*7001*005010X221A1~AK9*A*1*1*1~SE*4*0001~GE*1*42~IEA*1*" + control + "~"
	p, _ := json.Marshal(map[string]string{"answers": "x12:P:ZZ:ACMEHP:ZZ:RIVERSIDE:000007001", "partner": "ZZ:ACMEHP", "x12": x})
	return sink.Message{EffectKey: "ack999:k:" + control, Kind: "ack.999", Payload: p, CreatedAt: t0}
}

// cutProxy forwards TCP to target; once armed with n, it cuts the
// connection after n more bytes from the client, as a network failing
// mid-upload would.
type cutProxy struct {
	ln    net.Listener
	after atomic.Int64 // bytes left before the cut; <= 0: not armed
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.closeAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(c, s); c.Close() }()
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if left := p.after.Load(); left > 0 && p.after.Add(-int64(n)) <= 0 {
							p.closeAll()
							return
						}
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						s.Close()
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *cutProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestConnectionDroppedMidUpload: the connection is cut while a large file
// is being written: the attempt is retried, nothing stands under the final
// name, and the next attempt, over a new connection, delivers the one
// complete file.
func TestConnectionDroppedMidUpload(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	dir := folder(t, sshd)
	via, proxy := proxied(t, sshd)
	s := newSink(t, via, via.Addr, dir, nil)
	ctx := context.Background()
	if res := s.Deliver(ctx, ackMessage("000000001"), time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("first delivery: %+v", res)
	}
	big := sink.Message{EffectKey: "payment:BIG:1", Kind: "payment.posted", CreatedAt: t0,
		Payload: json.RawMessage(`{"note":"` + strings.Repeat("0123456789", 100_000) + `"}`)}
	name, body, err := sftpsink.FileName(sftpsink.DefaultName, big)
	if err != nil {
		t.Fatal(err)
	}
	proxy.after.Store(300_000) // well into the 1 MB upload
	res := s.Deliver(ctx, big, time.Now())
	if res.Outcome != sink.Retry || res.Err == "" || strings.Contains(res.Err, "0123456789") {
		t.Fatalf("cut delivery: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
		t.Fatalf("a file stands under the final name after a cut upload: %v", err)
	}
	parts, _ := filepath.Glob(filepath.Join(dir, name+".*.part"))
	if len(parts) != 1 {
		t.Fatalf("temporary files after the cut: %v", parts)
	}
	if fi, err := os.Stat(parts[0]); err != nil || fi.Size() >= int64(len(body)) {
		t.Fatalf("the cut did not fall mid-upload: %v", err)
	}
	time.Sleep(10 * time.Millisecond) // past the reconnect backoff
	if res := s.Deliver(ctx, big, time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("retry: %+v", res)
	}
	got := files(t, dir) // the cut upload's temporary file removed over the new connection
	if len(got) != 2 || got[1] != name {
		t.Fatalf("files %v, want the 999 and %s", got, name)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(b, body) {
		t.Errorf("delivered file is %d bytes, want %d", len(b), len(body))
	}
}

// proxied returns sshd as reached through a new cutProxy: its address
// gets the server's host key pinned.
func proxied(t *testing.T, sshd testenv.SSHD) (testenv.SSHD, *cutProxy) {
	t.Helper()
	proxy := newCutProxy(t, sshd.Addr)
	kh, err := os.ReadFile(sshd.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(sshd.Addr)
	phost, pport, _ := net.SplitHostPort(proxy.ln.Addr().String())
	via := sshd
	via.Addr = proxy.ln.Addr().String()
	via.KnownHosts = filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(via.KnownHosts, []byte(strings.ReplaceAll(string(kh), "["+host+"]:"+port, "["+phost+"]:"+pport)), 0o600)
	return via, proxy
}

// TestLaterAttemptRemovesTheTemporaryFileOfAKilledOne: an upload cut
// mid-file by a process that then dies (its memory of the temporary file
// lost with it) leaves a temporary file in the partner's folder; a later
// attempt of the row, in a new process, removes it and delivers the one
// file: the attempt right after, or one after an attempt that never
// reached the server (the partner down, a connect that failed), which
// left nothing of its own.
func TestLaterAttemptRemovesTheTemporaryFileOfAKilledOne(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later int
	}{{"next", 2}, {"after_a_failed_connect", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			sshd := testenv.OpenSSH(t)
			dir := folder(t, sshd)
			via, proxy := proxied(t, sshd)
			ctx := context.Background()
			big := sink.Message{EffectKey: "payment:BIG:" + tc.name, Kind: "payment.posted", CreatedAt: t0, Attempt: 1,
				Payload: json.RawMessage(`{"note":"` + strings.Repeat("0123456789", 100_000) + `"}`)}
			name, body, err := sftpsink.FileName(sftpsink.DefaultName, big)
			if err != nil {
				t.Fatal(err)
			}
			killed := newSink(t, via, via.Addr, dir, nil)
			proxy.after.Store(300_000) // well into the 1 MB upload
			if res := killed.Deliver(ctx, big, time.Now()); res.Outcome != sink.Retry {
				t.Fatalf("cut delivery: %+v", res)
			}
			if parts, _ := filepath.Glob(filepath.Join(dir, name+".*.part")); len(parts) != 1 {
				t.Fatalf("temporary files after the cut: %v", parts)
			}
			// The process dies: a new one (a new sink, nothing
			// remembered) makes the later attempt.
			restarted := newSink(t, sshd, "", dir, nil)
			big.Attempt = tc.later
			if res := restarted.Deliver(ctx, big, time.Now()); res.Outcome != sink.Delivered {
				t.Fatalf("attempt %d: %+v", tc.later, res)
			}
			if got := files(t, dir); len(got) != 1 || got[0] != name {
				t.Fatalf("files %v, want %s alone", got, name)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(b, body) {
				t.Errorf("delivered file is %d bytes, want %d", len(b), len(body))
			}
		})
	}
}

// TestPermissionErrorIsRetriedThenDeadLettered: a folder the SFTP user
// may not write to makes every attempt fail; the relay retries, then
// dead-letters the row with the server's reason, and no file content
// reaches the error.
func TestPermissionErrorIsRetriedThenDeadLettered(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	dir := folder(t, sshd)
	os.Chmod(dir, 0o555) // root's, not writable by the SFTP user
	st := drivertest.SQLite(t)
	routes := map[string][]string{"payment.posted": {"ledger"}, "claim.received": {"ledger"},
		"ack.999": {"partner"}, "ack.ta1": {"partner"}}
	ingest(t, st, routes, "a.835", remit(7002, "PERM"))
	round := relay(t, st, map[string]outbox.Deliverer{"partner": newSink(t, sshd, "", dir, nil)}, 2)
	round()
	row := rowsOf(t, st, "ack.999")[0]
	if row.Status != outbox.StatusPending || row.Attempts != 1 || !strings.Contains(row.LastError, "permission denied") {
		t.Fatalf("after one attempt: %s %d %q", row.Status, row.Attempts, row.LastError)
	}
	round()
	row = rowsOf(t, st, "ack.999")[0]
	if row.Status != outbox.StatusDead || row.Attempts != 2 || !strings.Contains(row.LastError, "permission denied") ||
		strings.Contains(row.LastError, "ISA") {
		t.Fatalf("after two attempts: %s %d %q", row.Status, row.Attempts, row.LastError)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Errorf("files %v", got)
	}
	// A directory that does not exist is retried the same way.
	s := newSink(t, sshd, "", filepath.Join(dir, "missing"), nil)
	if res := s.Deliver(context.Background(), row.Message(), time.Now()); res.Outcome != sink.Retry ||
		!strings.Contains(res.Err, "not exist") {
		t.Errorf("missing directory: %+v", res)
	}
}

// TestResentFileMakesNoSecondFile: the same 835 arriving again (under
// another name) is a duplicate: no second 999, so still one file.
func TestResentFileMakesNoSecondFile(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	dir := folder(t, sshd)
	st := drivertest.SQLite(t)
	routes := map[string][]string{"payment.posted": {"partner"}, "claim.received": {"partner"},
		"ack.999": {"partner"}, "ack.ta1": {"partner"}}
	data := remit(7003, "RESENT")
	ingest(t, st, routes, "a.835", data)
	round := relay(t, st, map[string]outbox.Deliverer{"partner": newSink(t, sshd, "", dir, nil)}, 5)
	round()
	first := files(t, dir)
	ingest(t, st, routes, "again/a.835", data)
	round()
	if got := files(t, dir); len(first) != 2 || strings.Join(got, ",") != strings.Join(first, ",") {
		t.Errorf("files after the re-send %v, before %v", got, first)
	}
}

// TestMultiSinkRoutes: ack.999 routed to two SFTP sinks puts the 999 in
// both folders, one outbox row per sink; and a source's own routes send
// its acknowledgments to its partner's folder alone.
func TestMultiSinkRoutes(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	acksDir, partnerDir, otherDir := folder(t, sshd), folder(t, sshd), folder(t, sshd)
	st := drivertest.SQLite(t)
	global := map[string][]string{"payment.posted": {"acks"}, "claim.received": {"acks"},
		"ack.999": {"acks", "partner"}, "ack.ta1": {"acks"}}
	ingest(t, st, global, "a.835", remit(7004, "MULTI"))
	// The other source routes ack.999 to its own partner only.
	perSource := map[string][]string{"payment.posted": {"acks"}, "claim.received": {"acks"},
		"ack.999": {"other"}, "ack.ta1": {"acks"}}
	ingest(t, st, perSource, "b.835", remit(7005, "OTHER"))
	sinks := map[string]outbox.Deliverer{"acks": newSink(t, sshd, "", acksDir, nil),
		"partner": newSink(t, sshd, "", partnerDir, nil), "other": newSink(t, sshd, "", otherDir, nil)}
	relay(t, st, sinks, 5)()
	rows := rowsOf(t, st, "ack.999")
	if len(rows) != 3 {
		t.Fatalf("%d 999 rows, want 3", len(rows))
	}
	bySink := map[string]outbox.Row{}
	for _, r := range rows {
		if r.Status != outbox.StatusDelivered {
			t.Errorf("row %s for %s: %s", r.EffectKey, r.Sink, r.Status)
		}
		bySink[r.Sink] = r
	}
	if bySink["partner"].EffectKey != bySink["acks"].EffectKey {
		t.Errorf("keys %s and %s", bySink["acks"].EffectKey, bySink["partner"].EffectKey)
	}
	var acksX12 []string
	for _, n := range files(t, acksDir) {
		if strings.HasSuffix(n, ".x12") {
			acksX12 = append(acksX12, n)
		}
	}
	if p := files(t, partnerDir); len(acksX12) != 1 || len(p) != 1 || p[0] != acksX12[0] {
		t.Errorf("acks folder 999s %v, partner folder %v", acksX12, p)
	}
	if o := files(t, otherDir); len(o) != 1 || o[0] == acksX12[0] {
		t.Errorf("other source's partner folder %v", o)
	}
}

// TestFileNamesAreSafe: partner data in a name cannot leave the directory
// or hide the file; patterns with separators, unknown placeholders or no
// unique part are refused.
func TestFileNamesAreSafe(t *testing.T) {
	msg := sink.Message{EffectKey: "claim:../../etc/passwd", Kind: "claim.received", CreatedAt: t0,
		Payload: json.RawMessage(`{"sender":"ZZ:../../x","receiver":".."}`)}
	name, _, err := sftpsink.FileName("{sender}_{receiver}_{control}.{ext}", msg)
	if err != nil || strings.ContainsAny(name, "/\\:") || strings.HasPrefix(name, ".") ||
		!strings.HasPrefix(name, "ZZ_.._.._x____") || !strings.HasSuffix(name, ".json") {
		t.Errorf("name %q, %v", name, err)
	}
	if name, _, err := sftpsink.FileName("{receiver}{control}", msg); err != nil || strings.HasPrefix(name, ".") {
		t.Errorf("name %q, %v", name, err)
	}
	for _, p := range []string{"", "acks/{control}.x12", "..\\{id}", ".{id}", "{kind}.x12", "{control}_{patient}.x12", "{control"} {
		if err := sftpsink.CheckPattern(p); err == nil {
			t.Errorf("pattern %q accepted", p)
		}
	}
	if err := sftpsink.CheckPattern(sftpsink.DefaultName); err != nil {
		t.Error(err)
	}
}

// TestTwoAcknowledgmentsUnderOneNameNeverReplaceEachOther: 835s addressed
// to ZZ:RIVERSIDE and 30:RIVERSIDE get 999s from separate control-number
// sequences (ours is "qualifier:id"), so both carry ISA13 000000001 and
// the default name ack.999_RIVERSIDE_000000001.x12. The second must not
// replace the first in the partner's folder (a lost 999): it waits, with
// the collision as its error, until the partner has taken the first.
func TestTwoAcknowledgmentsUnderOneNameNeverReplaceEachOther(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	dir := folder(t, sshd)
	st := drivertest.SQLite(t)
	routes := map[string][]string{"payment.posted": {"ledger"}, "claim.received": {"ledger"},
		"ack.999": {"partner"}, "ack.ta1": {"partner"}}
	ingest(t, st, routes, "zz.835", remit(7101, "QUALZZ"))
	other := bytes.Replace(remit(7102, "QUAL30"), []byte("*ZZ*RIVERSIDE      *"), []byte("*30*RIVERSIDE      *"), 1)
	ingest(t, st, routes, "30.835", other)
	acks := rowsOf(t, st, "ack.999")
	if len(acks) != 2 || x12Of(t, acks[0])[90:99] != x12Of(t, acks[1])[90:99] {
		t.Fatalf("want two 999s with one ISA13: %d rows", len(acks))
	}
	s := newSink(t, sshd, "", dir, nil)
	name := "ack.999_RIVERSIDE_" + x12Of(t, acks[0])[90:99] + ".x12"
	if res := s.Deliver(context.Background(), acks[0].Message(), time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("first 999: %+v", res)
	}
	res := s.Deliver(context.Background(), acks[1].Message(), time.Now())
	if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != x12Of(t, acks[0]) {
		t.Fatalf("the first 999 was replaced by the second (%+v)", res)
	}
	if res.Outcome != sink.Retry || !strings.Contains(res.Err, name) {
		t.Errorf("second 999: %+v", res)
	}
	// The first again (a retry after a crash) is delivered; the partner
	// takes the file; then the second goes through.
	if res := s.Deliver(context.Background(), acks[0].Message(), time.Now()); res.Outcome != sink.Delivered {
		t.Errorf("first 999 again: %+v", res)
	}
	os.Remove(filepath.Join(dir, name))
	if res := s.Deliver(context.Background(), acks[1].Message(), time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("second 999 once the first was taken: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != x12Of(t, acks[1]) {
		t.Errorf("file %q", b)
	}
	if got := files(t, dir); len(got) != 1 {
		t.Errorf("files %v", got)
	}
}
