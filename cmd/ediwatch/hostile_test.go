package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/store/sqlite"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestHostileInputs feeds a running daemon every file of the public corpus
// and generated hostile inputs through a local drop, with good files among
// them. The daemon stays up, its memory stays bounded, every regular file
// ends classified in the ledger, and the good payments are delivered.
// (incomplete_grace is off: hostile files without an IEA are rejected at
// once instead of after the grace a stalled upload gets.)
func TestHostileInputs(t *testing.T) {
	rec := newDedup()
	srv := httptest.NewServer(rec)
	defer srv.Close()
	drop := t.TempDir()
	dbPath := filepath.Join(t.TempDir(), "e.db")
	cfgPath := filepath.Join(t.TempDir(), "ediwatch.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`store: {driver: sqlite, dsn: %q}
sources:
  - {name: drop, type: local, directories: [%q], poll_interval: 200ms, stable_for: 0s, them: "ZZ:PARTNER", us: "ZZ:US", max_file_size: 2000000000,
     incomplete_grace: 0s}
sinks:
  ledger: {url: %q}
  acks: {url: %q}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: acks, ack.ta1: acks}
http: {listen: "127.0.0.1:0"}
log: {level: info}
`, "file:"+dbPath, drop, srv.URL, srv.URL)), 0o600)

	files := 0
	put := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(drop, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		files++
	}
	// The whole public corpus.
	corpus := testenv.Corpus(t)
	paths, _ := filepath.Glob(filepath.Join(corpus, "*", "*"))
	for i, p := range paths {
		data, _ := os.ReadFile(p)
		put(fmt.Sprintf("corpus-%02d-%s", i, filepath.Base(p)), data)
	}
	isa := "ISA*00*          *00*          *ZZ*PARTNER        *ZZ*US             *261130*0930*^*00501*000000001*0*P*:~"
	// A 1 GB file with no segment terminator after its ISA.
	huge, _ := os.Create(filepath.Join(drop, "no-terminator.x12"))
	huge.WriteString(isa + "GS*HP")
	chunk := bytes.Repeat([]byte("A"), 1<<20)
	for i := 0; i < 1000; i++ {
		huge.Write(chunk)
	}
	huge.Close()
	files++
	// A 10 MB single segment inside a set.
	put("ten-mb-segment.x12", []byte(isa+"GS*HP*P*U*20261130*0930*1*X*005010X221A1~ST*835*0001~NTE*"+
		strings.Repeat("X", 10<<20)+"~SE*3*0001~GE*1*1~IEA*1*000000001~"))
	noise := make([]byte, 1<<20)
	rand.Read(noise)
	put("noise.edi", noise)
	put("empty.x12", nil)
	put("isa-storm.x12", []byte(strings.Repeat(isa, 5000)))
	var hl strings.Builder
	hl.WriteString(isa + "GS*HC*P*U*20261130*0930*2*X*005010X222A1~ST*837*0001~")
	for i := 1; i <= 10000; i++ {
		parent := ""
		if i > 1 {
			parent = strconv.Itoa(i - 1)
		}
		fmt.Fprintf(&hl, "HL*%d*%s*22*1~", i, parent)
	}
	fmt.Fprintf(&hl, "SE*%d*0001~GE*1*2~IEA*1*000000001~", 10002)
	put("deep-hl.x12", []byte(hl.String()))
	// Good payments among them, under awkward names.
	good := 0
	for i, name := range []string{"with space.835", "ünïcødé.835", "a..b.835", "plain.835"} {
		var b bytes.Buffer
		x12gen.Remit{Control: 9000 + i, Trace: fmt.Sprintf("GOOD%d-", i)}.Write(&b)
		put(name, b.Bytes())
		good++
	}
	// Not regular files: never opened.
	os.Symlink("/etc/passwd", filepath.Join(drop, "link.835"))
	syscall.Mkfifo(filepath.Join(drop, "fifo.835"), 0o644)

	cmd, logs := startDaemon(t, cfgPath)
	st, err := sqlite.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitFor(t, "every file classified", 120*time.Second, func() bool {
		c, err := st.Counts(context.Background())
		return err == nil && c.Files["ingested"]+c.Files["rejected"]+c.Files["failed"] == files
	})
	waitFor(t, "the good payments delivered", 30*time.Second, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for k := range rec.effects {
			if strings.HasPrefix(k, "payment:1512345678:GOOD") {
				n++
			}
		}
		return n == good
	})
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	var hwm int64
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm, _ = strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	t.Logf("daemon peak RSS %d MB over %d files", hwm/1024, files)
	if hwm == 0 || hwm > 300*1024 {
		t.Errorf("daemon peak RSS %d kB", hwm)
	}
	if cmd.ProcessState != nil {
		t.Fatalf("the daemon exited: %s", logs)
	}
	c, _ := st.Counts(context.Background())
	t.Logf("ledger %v, inbox %v, sightings %v, outbox %v", c.Files, c.Inbox, c.Sightings, c.Outbox)
	if c.Inbox["rejected"] < 10 {
		t.Errorf("only %d rejected sets among the hostile inputs", c.Inbox["rejected"])
	}
	// Visible in metrics and in reconcile.
	var addr string
	for _, line := range bytes.Split(logs.Bytes(), []byte("\n")) {
		if i := bytes.Index(line, []byte(`"http":"`)); i >= 0 {
			addr = string(line[i+8 : i+8+bytes.IndexByte(line[i+8:], '"')])
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The counter counts rejection events (a rejected key later reclaimed,
	// or rejected again, counts each time); the inbox holds current rows.
	m := regexp.MustCompile(`ediwatch_transaction_sets_total\{outcome="rejected"\} (\d+)`).FindSubmatch(body)
	if m == nil {
		t.Error("/metrics lacks the rejected sets counter")
	} else if n, _ := strconv.Atoi(string(m[1])); n < c.Inbox["rejected"] {
		t.Errorf("rejected sets in /metrics %d, rejected rows in the store %d", n, c.Inbox["rejected"])
	}
	out, err := command(t, "reconcile", "--json", "--config", cfgPath).Output()
	var rep struct {
		Files []struct {
			Status string
			Files  int
		}
	}
	json.Unmarshal(out, &rep)
	classified := 0
	for _, f := range rep.Files {
		classified += f.Files
	}
	if err != nil || classified != files {
		t.Errorf("reconcile: %v, %d files classified of %d", err, classified, files)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
	if strings.Contains(logs.String(), `"level":"error"`) || strings.Contains(logs.String(), "panic") {
		t.Errorf("errors in the logs:\n%s", logs.String())
	}
}
