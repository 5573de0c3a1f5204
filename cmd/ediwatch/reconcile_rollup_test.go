package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store/history"
)

// TestReconcileReadsRollupsOrRows: `ediwatch reconcile` reads the closed
// days of its window from the rollups maintenance folded, and --rows reads
// every row: the two agree on a store as folded, and part when a folded
// day's rows change under its rollup (here deleted, as by hand).
func TestReconcileReadsRollupsOrRows(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+db))
	ctx := context.Background()
	now := time.Now().UTC()
	st := storeWithClaims(t, db, now)
	if err := history.SQLite(ctx, st.DB(), 2000, 6, now, nil); err != nil {
		t.Fatal(err)
	}
	// Six days of history: the five closed before today, less the one
	// that closed within the hour.
	if n, err := reconcile.FoldClosed(ctx, st, now, 7*24*time.Hour, 1000); err != nil || n < 5 {
		t.Fatalf("folded %d days: %v", n, err)
	}
	report := func(args ...string) (string, int) {
		t.Helper()
		out, _ := command(t, append([]string{"reconcile", "--json", "--since", "5d", "--config", cfg}, args...)...).Output()
		var rep reconcile.Report
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("reconcile %v: %v\n%s", args, err, out)
		}
		n := 0
		for _, p := range rep.Payers {
			n += p.Enqueued
		}
		b, _ := json.Marshal(rep.Payers)
		return string(b), n
	}
	rolled, enqueued := report()
	if rows, _ := report("--rows"); rows != rolled || enqueued == 0 {
		t.Fatalf("from rollups:\n%s\nfrom rows:\n%s", rolled, rows)
	}
	three := now.Add(-3 * 24 * time.Hour)
	res, err := st.DB().Exec(`DELETE FROM outbox WHERE kind = 'payment.posted' AND created_at >= ? AND created_at < ?`,
		three.Add(-12*time.Hour).UnixMicro(), three.UnixMicro())
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := res.RowsAffected()
	st.Close()
	if gone == 0 {
		t.Fatal("no payment row deleted")
	}
	if _, r := report(); r != enqueued {
		t.Errorf("after deleting %d rows of folded days: %d enqueued from rollups, want %d", gone, r, enqueued)
	}
	if _, w := report("--rows"); w != enqueued-int(gone) {
		t.Errorf("after deleting %d rows of folded days: %d enqueued from rows, want %d", gone, w, enqueued-int(gone))
	}
}
