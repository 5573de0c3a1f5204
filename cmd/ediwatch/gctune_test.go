package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestIngestGCTunerFollowsTheLiveHeap: while `ediwatch ingest` runs, the
// collector's target is the memory limit, GOGC off: the floor while
// little is live, raised to 1.5 times the live heap (plus what the runtime
// holds besides) after a collection that finds more, and both settings
// restored when the ingest ends. Without the raise, a live heap past the
// floor would be collected without end.
func TestIngestGCTunerFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(1 << 40)
	defer debug.SetGCPercent(prevPercent)
	defer debug.SetMemoryLimit(prevLimit)

	restore := tuneIngestGC()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Errorf("GOGC %d while tuned, want off", p)
	}
	if l := debug.SetMemoryLimit(-1); l != ingestHeapFloor {
		t.Errorf("memory limit %d while little is live, want the floor %d", l, ingestHeapFloor)
	}
	live := make([][]byte, 0, 64)
	for range 64 {
		live = append(live, make([]byte, 2<<20)) // 128 MiB live, past the floor
	}
	want := int64(128<<20) * 3 / 2
	limit := int64(0)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if limit = debug.SetMemoryLimit(-1); limit >= want {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if limit < want {
		t.Errorf("memory limit %d with 128 MiB live, want at least %d", limit, want)
	}
	runtime.KeepAlive(live)
	restore()
	if p := debug.SetGCPercent(-1); p != 100 {
		t.Errorf("GOGC %d after the ingest, want 100 restored", p)
	}
	debug.SetGCPercent(100)
	if l := debug.SetMemoryLimit(-1); l != 1<<40 {
		t.Errorf("memory limit %d after the ingest, want %d restored", l, int64(1<<40))
	}
}

// TestIngestGCTunerLeavesTheEnvironmentsSettings: GOGC or GOMEMLIMIT in
// the environment is the operator's choice: the ingest leaves both alone.
func TestIngestGCTunerLeavesTheEnvironmentsSettings(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(env, "100")
			prev := debug.SetGCPercent(100)
			defer debug.SetGCPercent(prev)
			restore := tuneIngestGC()
			defer restore()
			if p := debug.SetGCPercent(100); p != 100 {
				t.Errorf("GOGC %d with %s set, want 100 left alone", p, env)
			}
		})
	}
}
