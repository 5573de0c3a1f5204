package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// ingestAs records data as path of source "test" at now under the
// correlation id corr.
func ingestAs(t *testing.T, s store.Store, path, corr string, now time.Time, data []byte) *inbox.Report {
	t.Helper()
	r, err := inbox.Ingest(context.Background(), Options(t, s), inbox.FileInfo{Source: "test",
		Path: path, Size: int64(len(data)), MTime: t0, SHA256: "sha-" + path, CorrelationID: corr, Now: now},
		bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ingest %s: %v", path, err)
	}
	return r
}

// testFilesListAndDetail: the console's file listing filters the ledger by
// source, status and update time, newest first, bounded by its limit; a
// file's detail (by its arrival's correlation id) holds the sets it
// claimed, the sightings of its re-sent sets and the outbox rows it
// inserted, without payloads; an unknown id is ErrNotFound.
func testFilesListAndDetail(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingestAs(t, s, "in/a.835", "corr-a", t0, Fixture(t, "835_canonical.x12"))
	ingestAs(t, s, "in/b.835", "corr-b", t0.Add(time.Minute), Fixture(t, "835_canonical.x12"))
	ingestAs(t, s, "in/c.835", "corr-c", t0.Add(2*time.Minute), Fixture(t, "835_changed_content.x12"))
	later := t0.Add(2 * time.Hour)
	if _, err := s.RecordFileProblem(ctx, inbox.FileInfo{Source: "other", Path: "in/d.835", Size: 1, MTime: later,
		CorrelationID: "corr-d", Now: later}, inbox.FileRetrying, "connection reset"); err != nil {
		t.Fatal(err)
	}
	paths := func(f inbox.FileFilter, limit int) []string {
		t.Helper()
		rows, err := s.ListFiles(ctx, f, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.Path)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		f     inbox.FileFilter
		limit int
		want  []string
	}{
		{"all", inbox.FileFilter{}, 10, []string{"in/d.835", "in/c.835", "in/b.835", "in/a.835"}},
		{"limit", inbox.FileFilter{}, 2, []string{"in/d.835", "in/c.835"}},
		{"source", inbox.FileFilter{Source: "test"}, 10, []string{"in/c.835", "in/b.835", "in/a.835"}},
		{"status", inbox.FileFilter{Status: inbox.FileRetrying}, 10, []string{"in/d.835"}},
		{"since", inbox.FileFilter{Since: t0.Add(time.Minute)}, 10, []string{"in/d.835", "in/c.835", "in/b.835"}},
		{"until", inbox.FileFilter{Until: t0.Add(time.Minute)}, 10, []string{"in/a.835"}},
		{"none", inbox.FileFilter{Source: "nosuch"}, 10, nil},
	} {
		if got := paths(tc.f, tc.limit); !equalStrings(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	rows, _ := s.ListFiles(ctx, inbox.FileFilter{Status: inbox.FileRetrying}, 1)
	if len(rows) != 1 || rows[0].Source != "other" || rows[0].LastError != "connection reset" || rows[0].CorrelationID != "corr-d" ||
		!rows[0].UpdatedAt.Equal(later) {
		t.Errorf("retrying row %+v", rows)
	}

	a, err := s.FileDetail(ctx, "corr-a", 100)
	if err != nil {
		t.Fatal(err)
	}
	if a.File.Path != "in/a.835" || a.File.Status != inbox.FileIngested || a.File.Sets != 1 || !a.File.UpdatedAt.Equal(t0) {
		t.Errorf("file %+v", a.File)
	}
	if len(a.Sets) != 1 || a.Sets[0].Outcome != "processed" || a.Sets[0].Type != "835" || a.Sets[0].Sighting {
		t.Errorf("sets of a %+v", a.Sets)
	}
	kinds := map[string]int{}
	for _, e := range a.Effects {
		kinds[e.Kind]++
		if len(e.Payload) != 0 || e.LastResponse != "" || e.ID == 0 || e.Status != "pending" || e.EffectKey == "" {
			t.Errorf("effect %+v", e)
		}
	}
	if kinds["payment.posted"] != 1 || kinds["ack.999"] != 1 || len(a.Effects) != 2 {
		t.Errorf("effects of a %v", kinds)
	}
	for corr, want := range map[string]string{"corr-b": "duplicate", "corr-c": "conflict"} {
		d, err := s.FileDetail(ctx, corr, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Sets) != 1 || d.Sets[0].Outcome != want || !d.Sets[0].Sighting || d.Sets[0].Key != a.Sets[0].Key {
			t.Errorf("sets of %s %+v, want one %s sighting of %s", corr, d.Sets, want, a.Sets[0].Key)
		}
	}
	if _, err := s.FileDetail(ctx, "corr-nosuch", 100); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown correlation id: %v", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
