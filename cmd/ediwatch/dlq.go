package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
)

func newDLQCmd(stdout io.Writer) *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, show, replay or discard dead-lettered deliveries",
		Long: `dlq works on the dead-letter queue of the configured store.

  dlq list [--sink S] [--json] [--show-phi]
                                     dead rows, newest last
  dlq show ID [--show-phi]           one row

Claim effect keys name a patient control number and receivers echo payloads
in their responses: keys are shown as digests, and responses and payloads
not at all, unless --show-phi is given.
  dlq replay ID... | --sink S | --all  deliver again, with the same Idempotency-Key
  dlq discard ID...                  resolve without delivering (the row is kept,
                                     so its effect key still stops a re-sent document)`,
	}
	cmd.PersistentFlags().StringVar(&cfgPath, "config", "", "configuration file")
	withStore := func(run func(cmd *cobra.Command, s store.Store, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			s, err := openStore(cmd.Context(), cfg.Store, true)
			if err != nil {
				return err
			}
			defer s.Close()
			return run(cmd, s, args)
		}
	}
	var sinkName string
	var asJSON, showPHI, all bool
	list := &cobra.Command{Use: "list", Short: "List dead rows", Args: cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, s store.Store, _ []string) error {
			rows, err := s.ListDead(cmd.Context(), sinkName, 10000)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				for _, r := range rows {
					enc.Encode(rowSummary(r, showPHI))
				}
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			head := "ID\tSINK\tKIND\tATTEMPTS\tSTATUS\tUPDATED\tEFFECT KEY\tLAST ERROR"
			if showPHI {
				head += "\tRESPONSE"
			}
			fmt.Fprintln(tw, head)
			for _, r := range rows {
				key := sink.LogKey(r.Kind, r.EffectKey)
				if showPHI {
					key = r.EffectKey
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s", r.ID, r.Sink, r.Kind, r.Attempts, r.LastStatus,
					r.UpdatedAt.Format(time.RFC3339), key, r.LastError)
				if showPHI {
					fmt.Fprintf(tw, "\t%s", r.LastResponse)
				}
				fmt.Fprintln(tw)
			}
			return tw.Flush()
		})}
	list.Flags().StringVar(&sinkName, "sink", "", "only this sink")
	list.Flags().BoolVar(&asJSON, "json", false, "one JSON object per row")
	list.Flags().BoolVar(&showPHI, "show-phi", false, "show effect keys in clear and the receivers' responses (patient data)")
	show := &cobra.Command{Use: "show ID", Short: "Show one row", Args: cobra.ExactArgs(1),
		RunE: withStore(func(cmd *cobra.Command, s store.Store, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			r, err := s.GetOutbox(cmd.Context(), ids[0])
			if err != nil {
				return err
			}
			out := rowSummary(r, showPHI)
			if showPHI {
				out["payload"] = r.Payload
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		})}
	show.Flags().BoolVar(&showPHI, "show-phi", false, "include the effect key in clear, the payload and the receiver's response (patient data)")
	replay := &cobra.Command{Use: "replay (ID... | --sink S | --all)", Short: "Deliver dead rows again",
		RunE: withStore(func(cmd *cobra.Command, s store.Store, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			if len(ids) == 0 && sinkName == "" && !all {
				return usageError("replay: name rows, --sink S or --all")
			}
			n, err := s.Replay(cmd.Context(), ids, sinkName, all, time.Now().UTC())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%d rows queued for delivery again\n", n)
			return nil
		})}
	replay.Flags().StringVar(&sinkName, "sink", "", "every dead row of this sink")
	replay.Flags().BoolVar(&all, "all", false, "every dead row")
	discard := &cobra.Command{Use: "discard ID...", Short: "Resolve dead rows without delivering them",
		Args: cobra.MinimumNArgs(1),
		RunE: withStore(func(cmd *cobra.Command, s store.Store, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			n, err := s.Discard(cmd.Context(), ids, time.Now().UTC())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%d rows discarded\n", n)
			return nil
		})}
	cmd.AddCommand(list, show, replay, discard)
	return cmd
}

func parseIDs(args []string) ([]int64, error) {
	var ids []int64
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, usageError("not a row id: %q", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// rowSummary describes a row; patient data (a claim's effect key in clear,
// the receiver's response) only when showPHI.
func rowSummary(r outbox.Row, showPHI bool) map[string]any {
	out := map[string]any{"id": r.ID, "sink": r.Sink, "kind": r.Kind, "effect_key": sink.LogKey(r.Kind, r.EffectKey),
		"status": r.Status, "attempts": r.Attempts, "last_status": r.LastStatus, "last_error": r.LastError,
		"error_history": r.ErrorHistory, "correlation_id": r.CorrelationID, "created_at": r.CreatedAt,
		"age_from": r.AgeFrom, "updated_at": r.UpdatedAt}
	if showPHI {
		out["effect_key"] = r.EffectKey
		out["last_response"] = r.LastResponse
	}
	return out
}
