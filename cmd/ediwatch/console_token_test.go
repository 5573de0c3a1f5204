package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ediwatch/ediwatch/internal/config"
)

// TestShortConsoleTokenIsWarnedOf: a console token shorter than 32
// characters (a guessable one, which any cookie it signed lets an
// attacker try offline) starts the console with a warning that names the
// setting and the length, never the token; a long one gets none.
func TestShortConsoleTokenIsWarnedOf(t *testing.T) {
	dir := t.TempDir()
	write := func(name, tok string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := strings.Repeat("9f", 16)
	for _, tc := range []struct {
		viewer, admin string
		warned        []string
	}{
		{"letmein", long, []string{"console.token_file"}},
		{long, "s3sam3", []string{"console.admin_token_file"}},
		{long, "", nil},
		{long, long + "0", nil},
	} {
		core, logs := observer.New(zap.WarnLevel)
		cfg := config.Default()
		cfg.Console = config.Console{Listen: "127.0.0.1:0", TokenFile: write("viewer", tc.viewer)}
		if tc.admin != "" {
			cfg.Console.AdminTokenFile = write("admin", tc.admin)
		}
		cs, err := newConsole(cfg, nil, func() map[string]string { return nil }, zap.New(core))
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		cs.ln.Close()
		var warned []string
		for _, e := range logs.All() {
			fields := e.ContextMap()
			warned = append(warned, fields["setting"].(string))
			for _, v := range []string{tc.viewer, tc.admin} {
				if v == "" {
					continue
				}
				if strings.Contains(e.Message, v) || fields["setting"] == v || fmt.Sprint(fields["characters"]) == v {
					t.Errorf("the warning shows a token: %v %v", e.Message, fields)
				}
			}
			if len(fields) != 2 {
				t.Errorf("the warning carries %v, want the setting and the length only", fields)
			}
		}
		if strings.Join(warned, ",") != strings.Join(tc.warned, ",") {
			t.Errorf("viewer %d, admin %d characters: warned of %v, want %v", len(tc.viewer), len(tc.admin), warned, tc.warned)
		}
	}
}
