package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/ediwatch/ediwatch/internal/reconcile"
)

// reconcileStuckAfter is when an undelivered row counts as stuck, as the
// daemon's divergence gauge counts it.
const reconcileStuckAfter = time.Hour

// maxReconcileWindow bounds how far back the page reconciles: the report
// reads every row of its window.
const maxReconcileWindow = 92 * 24 * time.Hour

type reconcileData struct {
	Since     string
	From      time.Time
	Error     string
	Report    *reconcile.Report
	Conflicts []reconcile.Conflict
}

// reconcileReport shows `ediwatch reconcile`'s report: per source and
// day the files, per payer the exact totals parsed, enqueued and
// delivered, dead and stuck rows, conflicts (keys that may name a patient
// digested) and the divergence.
func (c *Console) reconcileReport(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Now()
	data := reconcileData{Since: strings.TrimSpace(r.URL.Query().Get("since"))}
	if data.Since == "" {
		data.Since = "24h"
	}
	from, err := parseWhen(data.Since, now)
	if err == nil && now.Sub(from) > maxReconcileWindow {
		from = now.Add(-maxReconcileWindow)
	}
	if err != nil {
		data.Error = "since: " + err.Error()
		c.render(w, r, http.StatusBadRequest, "reconcile", data)
		return
	}
	data.From = from
	_, notATime := time.Parse(time.RFC3339, data.Since)
	if data.Report, err = c.reconciled(r.Context(), from, now, notATime != nil); err != nil {
		c.fail(w, err)
		return
	}
	for _, cf := range data.Report.Conflicts {
		cf.Key = shownKey(cf.Key)
		data.Conflicts = append(data.Conflicts, cf)
	}
	c.render(w, r, http.StatusOK, "reconcile", data)
}
