package sftpsink_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/sink/sftpsink"
	"github.com/ediwatch/ediwatch/internal/testenv"
)

// TestReadOnlyFolderKeepsTheCreateError: against internal-sftp -R every
// attempt fails to create its file, and that is the error kept: not the
// removal of an earlier attempt's temporary file that was never made
// (a read-only server refuses every remove, of a name that is not there
// too). Over the port of the test sshd that runs internal-sftp -R.
func TestReadOnlyFolderKeepsTheCreateError(t *testing.T) {
	sshd := testenv.OpenSSHRestricted(t, "readonly")
	dir := folder(t, sshd)
	s := newSink(t, sshd, "", dir, nil)
	for attempt := 1; attempt <= 3; attempt++ {
		msg := ackMessage("000000071")
		msg.Attempt = attempt
		res := s.Deliver(context.Background(), msg, time.Now())
		if res.Outcome != sink.Retry || !strings.Contains(res.Err, "create ") || strings.Contains(res.Err, "remove") {
			t.Errorf("attempt %d on a read-only server: %+v, want the create's failure", attempt, res)
		}
	}
	if got := files(t, dir); len(got) != 0 {
		t.Errorf("files %v on a read-only server", got)
	}
}

// TestUploadsGoOnWhereRemoveIsForbidden: against internal-sftp -P remove
// (rename allowed) a later attempt cannot remove the temporary file a cut
// attempt left; it uploads under its own name and delivers, and the file
// left behind is reported once, for an operator. A retry of an upload
// done but not recorded finds its file in place and counts as delivered,
// its own temporary file again left and reported once. Each server
// configuration over its own connection.
func TestUploadsGoOnWhereRemoveIsForbidden(t *testing.T) {
	sshd := testenv.OpenSSHRestricted(t, "noremove")
	dir := folder(t, sshd)
	ctx := context.Background()
	big := sink.Message{EffectKey: "payment:NOREMOVE:1", Kind: "payment.posted", CreatedAt: t0, Attempt: 1,
		Payload: json.RawMessage(`{"note":"` + strings.Repeat("0123456789", 100_000) + `"}`)}
	name, _, err := sftpsink.FileName(sftpsink.DefaultName, big)
	if err != nil {
		t.Fatal(err)
	}
	via, proxy := proxied(t, sshd)
	cut := newSink(t, via, via.Addr, dir, nil)
	proxy.after.Store(300_000) // well into the 1 MB upload
	if res := cut.Deliver(ctx, big, time.Now()); res.Outcome != sink.Retry {
		t.Fatalf("cut delivery: %+v", res)
	}
	left, _ := filepath.Glob(filepath.Join(dir, name+".*.part"))
	if len(left) != 1 {
		t.Fatalf("temporary files after the cut: %v", left)
	}

	core, logs := observer.New(zapcore.WarnLevel)
	s := newSink(t, sshd, "", dir, func(c *sftpsink.Config) { c.Log = zap.New(core) })
	big.Attempt = 2
	if res := s.Deliver(ctx, big, time.Now()); res.Outcome != sink.Delivered {
		t.Fatalf("attempt 2 where remove is forbidden: %+v", res)
	}
	if got := files(t, dir); len(got) != 2 || got[0] != name || got[1] != filepath.Base(left[0]) {
		t.Fatalf("files %v, want %s and the cut attempt's %s", got, name, filepath.Base(left[0]))
	}
	stale := func() []string {
		var names []string
		for _, e := range logs.FilterMessageSnippet("stays on the partner's server").All() {
			names = append(names, e.ContextMap()["file"].(string))
		}
		return names
	}
	if got := stale(); len(got) != 1 || got[0] != filepath.Base(left[0]) {
		t.Fatalf("reported left-behind files %v, want %s once", got, filepath.Base(left[0]))
	}

	// Attempt 3 finds its own file under the final name (attempt 2
	// delivered, the relay never heard): delivered, its temporary file
	// stays and is reported; once more, and it is not reported again.
	big.Attempt = 3
	for range 2 {
		if res := s.Deliver(ctx, big, time.Now()); res.Outcome != sink.Delivered {
			t.Fatalf("attempt 3 with the file in place: %+v", res)
		}
	}
	if got := stale(); len(got) != 2 || got[1] == got[0] {
		t.Errorf("reported left-behind files %v, want two names, each once", got)
	}
	if parts, _ := filepath.Glob(filepath.Join(dir, name+".*.part")); len(parts) != 2 {
		t.Errorf("temporary files %v, want the two the server would not remove", parts)
	}
}

// TestNamesNoServerTakesAreRefused: a name pattern that renders past 255
// bytes (with its temporary part) is refused when the sink is built, and
// a message whose values make a name longer than that is dead at once
// with the reason, not retried.
func TestNamesNoServerTakesAreRefused(t *testing.T) {
	long := strings.Repeat("x", 200) + "_{sender}_{control}.{ext}"
	if err := sftpsink.CheckNameLength(long, ".part", false); err == nil {
		t.Errorf("pattern %q accepted", long)
	}
	if err := sftpsink.CheckNameLength(sftpsink.DefaultName, ".part", false); err != nil {
		t.Errorf("the default pattern: %v", err)
	}
	// 255 bytes at most as a direct name, but not with a temporary part.
	edge := strings.Repeat("x", 255-16-1) + "_{id}"
	if err := sftpsink.CheckNameLength(edge, ".part", true); err != nil {
		t.Errorf("a 255-byte direct name: %v", err)
	}
	if err := sftpsink.CheckNameLength(edge, ".part", false); err == nil {
		t.Errorf("a 255-byte name with its temporary part accepted")
	}
	// A pattern of {kind} at the limit: the longest kinds count.
	kinds := strings.Repeat("k", 255-len("claim.received")-1-16) + "_{kind}{id}"
	if err := sftpsink.CheckNameLength(kinds, "", true); err != nil {
		t.Errorf("a 255-byte name of the longest kind: %v", err)
	}
	if err := sftpsink.CheckNameLength("k"+kinds, "", true); err == nil {
		t.Errorf("a 256-byte name of the longest kind accepted")
	}
	if _, err := sftpsink.New(sftpsink.Config{Name: "p", Directory: "/in", Pattern: long}); err == nil ||
		!strings.Contains(err.Error(), "255") {
		t.Errorf("New with a name pattern past 255 bytes: %v", err)
	}

	// Partner data longer than any envelope allows: 64 bytes kept of
	// each value, and a pattern that passed with the longest real ones.
	sshd := testenv.OpenSSH(t)
	dir := folder(t, sshd)
	pattern := strings.Repeat("y", 150) + "_{sender}_{receiver}_{id}.{ext}"
	s := newSink(t, sshd, "", dir, func(c *sftpsink.Config) { c.Pattern = pattern })
	p, _ := json.Marshal(map[string]string{"sender": strings.Repeat("S", 80), "receiver": strings.Repeat("R", 80)})
	msg := sink.Message{EffectKey: "payment:LONG:1", Kind: "payment.posted", Payload: p, CreatedAt: t0, Attempt: 1}
	if res := s.Deliver(context.Background(), msg, time.Now()); res.Outcome != sink.Dead || !strings.Contains(res.Err, "255") {
		t.Errorf("a name past 255 bytes: %+v, want dead naming the limit", res)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Errorf("files %v", got)
	}
}
