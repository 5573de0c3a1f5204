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
	"github.com/ediwatch/ediwatch/internal/store/sqlite"
)

// TestReconcileReadsRollupsOrRows: `ediwatch reconcile` reads the closed
// days of its window from the rollups maintenance folded, and --rows reads
// every row: the two agree on a store as folded, and part when a folded
// day's rows change under its rollup (here deleted, as by hand).
func TestReconcileReadsRollupsOrRows(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	cfg := writeConfig(t, fmt.Sprintf("store: {driver: sqlite, dsn: %q}", "file:"+db))
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := history.SQLite(ctx, st.DB(), 2000, 6, now, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := reconcile.FoldClosed(ctx, st, now, 400*24*time.Hour, 1000); err != nil || n < 4 {
		t.Fatalf("folded %d days: %v", n, err)
	}
	enqueued := func(args ...string) int {
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
		return n
	}
	rolled, rows := enqueued(), enqueued("--rows")
	if rolled != rows || rolled == 0 {
		t.Fatalf("enqueued payments: %d from rollups, %d from rows", rolled, rows)
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
	if r, w := enqueued(), enqueued("--rows"); r != rolled || w != rows-int(gone) {
		t.Errorf("after deleting %d rows of a folded day: %d from rollups (want %d), %d from rows (want %d)",
			gone, r, rolled, w, rows-int(gone))
	}
}
