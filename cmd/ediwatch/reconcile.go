package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/journal"
	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store"
)

func newReconcileCmd(stdout io.Writer) *cobra.Command {
	var cfgPath string
	var asJSON bool
	var journalPath string
	var fromRows bool
	since := config.Duration(24 * time.Hour)
	stuck := config.Duration(time.Hour)
	cmd := &cobra.Command{
		Use:   "reconcile --config FILE [--since 24h] [--stuck-after 1h] [--journal FILE] [--rows] [--json]",
		Short: "Compare what was parsed, enqueued and delivered; exit 1 on divergence",
		Long: `reconcile reports, per source and day, the files seen, ingested and rejected;
per payer, the payments and their exact money totals parsed, enqueued and
delivered, and unbalanced remittances; dead and stuck outbox rows; and the
conflicts recorded (an envelope key re-sent with other content, or a
business key such as a payment's payer and trace re-sent with other
content), which were quarantined rather than posted and await review. It
exits 1 when anything diverges: a parsed payment without exactly one outbox
row, a total that differs, a dead-lettered row, or a row undelivered for
longer than --stuck-after. Conflicts alone do not make it exit 1 (the
conflict metric alerts on them).

With --journal (the file poller.journal names; several replicas' files
may be given, comma-separated), it also lists every file the journal says
was deleted or moved from a drop since --since whose ingestion the store
no longer has (its ledger row gone, as after a failover to a standby that
never had the commit, or a restore from an older backup), and exits 1 if
there is any.

The closed days wholly inside the window are read from the rollups the
daemon's maintenance folds each day; --rows reads every row of the window
instead (slower over weeks), to check the rollups against the rows.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			st, err := openStore(cmd.Context(), cfg.Store, true)
			if err != nil {
				return err
			}
			defer st.Close()
			now := time.Now().UTC()
			var r store.Reconciler = st
			if fromRows {
				r = reconcile.FromRows(st)
			}
			rep, err := reconcile.Run(cmd.Context(), r, now.Add(-since.D()), stuck.D(), now)
			if err != nil {
				return err
			}
			if journalPath != "" {
				var entries []journal.Entry
				for _, path := range strings.Split(journalPath, ",") {
					f, err := os.Open(path)
					if err != nil {
						return &exitError{code: 2, err: fmt.Errorf("--journal: %w", err)}
					}
					es, err := journal.Read(f, now.Add(-since.D()))
					f.Close()
					if err != nil {
						return &exitError{code: 2, err: fmt.Errorf("--journal %s: %w", path, err)}
					}
					entries = append(entries, es...)
				}
				if err := reconcile.CheckJournal(cmd.Context(), st, entries, rep); err != nil {
					return err
				}
			}
			if asJSON {
				err = json.NewEncoder(stdout).Encode(rep)
			} else {
				err = rep.Print(stdout)
			}
			if err != nil {
				return err
			}
			if rep.Divergent {
				return &exitError{code: 1, silent: true}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "configuration file")
	cmd.Flags().Var(durationFlag{&since}, "since", "how far back to look (e.g. 24h, 7d)")
	cmd.Flags().Var(durationFlag{&stuck}, "stuck-after", "an undelivered row older than this is stuck")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&fromRows, "rows", false, "read every row of the window, not the rollups of its closed days")
	cmd.Flags().StringVar(&journalPath, "journal", "", "poller journal file(s) to compare with the store (comma-separated)")
	return cmd
}

// durationFlag is a pflag.Value for config.Duration (accepts days).
type durationFlag struct{ d *config.Duration }

func (f durationFlag) String() string { return f.d.String() }
func (f durationFlag) Type() string   { return "duration" }
func (f durationFlag) Set(s string) error {
	d, err := config.ParseDuration(s)
	if err == nil {
		*f.d = d
	}
	return err
}
