package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// command returns this test binary run as `ediwatch args...`.
func command(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "EDIWATCH_TEST_MAIN=1")
	return cmd
}

func writeConfig(t *testing.T, storeYAML string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ediwatch.yaml")
	body := storeYAML + `
sinks:
  ledger: {url: "https://erp.example.test/remittances"}
  acks: {url: "https://gateway.example.test/acks"}
routes: {payment.posted: ledger, claim.received: ledger, ack.999: acks, ack.ta1: acks}
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestIngestFromThreeProcesses runs three `ediwatch ingest` processes on
// the same file at once, against each driver: exactly one processes each
// set; the others report duplicates of that original.
func TestIngestFromThreeProcesses(t *testing.T) {
	stores := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string {
			return writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+filepath.Join(t.TempDir(), "e.db")))
		},
		"postgres": func(t *testing.T) string {
			url := testenv.PostgresURL(t)
			schema := fmt.Sprintf("cli_%d", time.Now().UnixNano())
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				c, err := pgx.Connect(context.Background(), url)
				if err == nil {
					c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
					c.Close(context.Background())
				}
			})
			return writeConfig(t, fmt.Sprintf("store: {driver: postgres, dsn: %q}", url+"&search_path="+schema))
		},
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			cfg := mk(t)
			file := fixture("multi_interchange.x12")
			var wg sync.WaitGroup
			outs := make([][]byte, 3)
			errs := make([]error, 3)
			for i := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var stderr bytes.Buffer
					cmd := command(t, "ingest", "--json", "--config", cfg, file)
					cmd.Stderr = &stderr
					outs[i], errs[i] = cmd.Output()
					if errs[i] != nil {
						errs[i] = fmt.Errorf("%v: %s", errs[i], stderr.String())
					}
				}()
			}
			wg.Wait()
			outcomes := map[string]map[string]int{} // key -> outcome -> count
			origOf := map[string]string{}           // key -> correlation id of the processing run
			var rows []map[string]any
			for i, out := range outs {
				if errs[i] != nil {
					t.Fatalf("process %d: %v", i, errs[i])
				}
				sc := bufio.NewScanner(bytes.NewReader(out))
				for sc.Scan() {
					var m map[string]any
					if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
						t.Fatalf("%v: %s", err, sc.Text())
					}
					rows = append(rows, m)
				}
			}
			for _, m := range rows {
				key, outcome := m["key"].(string), m["outcome"].(string)
				if outcomes[key] == nil {
					outcomes[key] = map[string]int{}
				}
				outcomes[key][outcome]++
				if outcome == "processed" || outcome == "business_duplicate" {
					origOf[key] = m["correlation_id"].(string)
				}
			}
			// Three 835 sets; the TA1-only interchange between them has no set
			// to claim.
			if len(outcomes) != 3 {
				t.Fatalf("%d keys, want 3: %v", len(outcomes), outcomes)
			}
			for key, o := range outcomes {
				if o["duplicate"] != 2 || o["processed"]+o["business_duplicate"] != 1 {
					t.Errorf("%s: %v, want one first claim and two duplicates", key, o)
				}
			}
			for _, m := range rows {
				if m["outcome"] == "duplicate" && m["original_correlation_id"] != origOf[m["key"].(string)] {
					t.Errorf("duplicate of %s refers to %v, not the original %s", m["key"], m["original_correlation_id"], origOf[m["key"].(string)])
				}
			}
			// One payment in all: the file's three 835s carry one TRN.
			c, err := config.Load(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s, err := openStore(context.Background(), c.Store, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			counts, _ := s.Counts(context.Background())
			if counts.Inbox["processed"] != 3 || counts.Outbox["pending"] != 1+2 || counts.Sightings["duplicate"] != 6 {
				t.Errorf("counts %+v", counts)
			}
		})
	}
}

func TestMigrateCommand(t *testing.T) {
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+filepath.Join(t.TempDir(), "m.db")))
	out, err := command(t, "migrate", "--config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sqlite store migrated") {
		t.Fatalf("%v: %s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("store: {driver: sqlite, dsn: x}\nstorre: {driver: x}\n"), 0o600)
	out, err = command(t, "migrate", "--config", bad).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), "storre: unknown key (did you mean store?)") {
		t.Errorf("unknown key: %v: %s", err, out)
	}
}

// TestIngestRecordsTheFilesSHA256: `ediwatch ingest` hashes the file on a
// goroutine of its own while it is parsed; every row the ingest writes
// names the SHA-256 of the very bytes read, the first time and when every
// set is a duplicate.
func TestIngestRecordsTheFilesSHA256(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+dbPath))
	var buf bytes.Buffer
	if _, err := (x12gen.Remit{SetsPerGroup: 100, ClaimsPerSet: 2}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "remit.835")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%x", sha256.Sum256(buf.Bytes()))
	if out, err := command(t, "migrate", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for range 2 {
		if out, err := command(t, "ingest", "--config", cfg, file).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	db, err := sql.Open("sqlite", "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"SELECT DISTINCT file_sha256 FROM inbox",
		"SELECT DISTINCT file_sha256 FROM sighting",
	} {
		var got []string
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			rows.Scan(&s)
			got = append(got, s)
		}
		rows.Close()
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want [%s]", q, got, want)
		}
	}
}

// TestANewerSchemaIsRefused: a database migrated by a newer ediwatch is
// refused by every command of this one (exit 2, naming both versions):
// this build would read the newer schema as the one it knows.
func TestANewerSchemaIsRefused(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+dbPath))
	if out, err := command(t, "migrate", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := command(t, "dlq", "list", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("the schema this build knows refused: %v: %s", err, out)
	}
	db, err := sql.Open("sqlite", "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, args := range [][]string{{"dlq", "list"}, {"migrate"}, {"sink", "list"}} {
		cmd := command(t, append(args, "--config", cfg)...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "9999") {
			t.Errorf("%v on a newer schema: %v, %s", args, err, out)
		}
	}
}

// TestIngestReadsTheFileAsItWasWhenOpened: a file appended to while
// `ediwatch ingest` reads it (a writer still uploading it) is ingested as
// it was when opened: the recorded SHA-256 and the sets ingested describe
// the same bytes, and the bytes appended are left for a later ingest.
func TestIngestReadsTheFileAsItWasWhenOpened(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+filepath.Join(dir, "e.db")))
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := openStore(ctx, cfg.Store, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var first, second bytes.Buffer
	if _, err := (x12gen.Remit{Control: 1, Trace: "FIRST", SetsPerGroup: 3}).Write(&first); err != nil {
		t.Fatal(err)
	}
	if _, err := (x12gen.Remit{Control: 2, Trace: "SECOND", SetsPerGroup: 3}).Write(&second); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "remit.835")
	if err := os.WriteFile(file, first.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := openRegular(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// The upload goes on after the open.
	w, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(second.Bytes()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	opts := inbox.Options{Store: s, Routes: cfg.RoutesFor("manual"), Ack: ackOptions(cfg, "manual")}
	res, _, err := ingestOpened(cmd, opts, nil, "manual", file, fh, st)
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Count(inbox.Processed); n != 3 || len(res.Sets) != 3 {
		t.Errorf("ingested %d sets (%d processed), want the 3 of the bytes hashed", len(res.Sets), n)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sums []string
	rows, err := db.Query("SELECT DISTINCT file_sha256 FROM inbox")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v string
		rows.Scan(&v)
		sums = append(sums, v)
	}
	rows.Close()
	if want := fmt.Sprintf("%x", sha256.Sum256(first.Bytes())); len(sums) != 1 || sums[0] != want {
		t.Errorf("file_sha256 %q, want [%s]", sums, want)
	}
}

// TestARunningReplicaStopsWhenTheSchemaTurnsNewer: a daemon watches the
// store's schema (watchSchema): once another replica migrates it past
// what this build knows, the watch returns the same refusal a command
// gets at its start (exit 2, naming both versions), which stops the
// daemon; until then it runs on, through a check that merely fails.
func TestARunningReplicaStopsWhenTheSchemaTurnsNewer(t *testing.T) {
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "e.db")
	st, err := openStore(ctx, config.Store{Driver: "sqlite", DSN: "file:" + dbPath, Migrate: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	done := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { done <- watchSchema(wctx, "sqlite", st, 20*time.Millisecond, zap.NewNop()) }()
	select {
	case err := <-done:
		t.Fatalf("the watch stopped on the schema it knows: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	db, err := sql.Open("sqlite", "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var exit *exitError
		if !errors.As(err, &exit) || exit.code != 2 || !strings.Contains(err.Error(), "9999") {
			t.Errorf("the watch returned %v, want exit 2 naming 9999", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a schema newer than this build knows went unnoticed")
	}
	cfg := config.Config{Sources: []config.Source{{PollInterval: config.Duration(5 * time.Second)},
		{PollInterval: config.Duration(time.Hour)}}}
	if got := schemaCheckEvery(cfg); got != 5*time.Second {
		t.Errorf("checked every %v with a source polled every 5s", got)
	}
	if got := schemaCheckEvery(config.Config{}); got != 30*time.Second {
		t.Errorf("checked every %v without sources", got)
	}
}
