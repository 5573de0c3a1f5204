package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/config"
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

  dlq list [FILTER] [--json] [--show-phi]
                                     dead rows, newest last
  dlq show ID [--show-phi]           one row, with its attempt history (the last 50
                                     requests, across replays: time, HTTP status,
                                     latency, class, response size)
  dlq replay ID... | FILTER | --all  deliver again, with the same Idempotency-Key
  dlq discard ID... | FILTER | --all resolve without delivering (the row is kept,
                                     so its effect key still stops a re-sent document)

FILTER narrows the rows by --sink S, --kind K (payment.posted, claim.received,
ack.999, ack.ta1), and --since T / --until T, when the row was dead-lettered
(since <= t < until); T is an RFC 3339 time (2026-11-28T00:00:00Z) or a
duration back from now (36h). Given ids, the filters narrow them further.

Claim effect keys name a patient control number and receivers echo payloads
in their responses: keys are shown as digests, and responses and payloads
not at all, unless --show-phi is given.`,
	}
	cmd.PersistentFlags().StringVar(&cfgPath, "config", "", "configuration file")
	// configured are the sinks of the configuration a subcommand loaded.
	var configured map[string]config.Sink
	withStore := func(run func(cmd *cobra.Command, s store.Store, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			configured = cfg.Sinks
			s, err := openStore(cmd.Context(), cfg.Store, true)
			if err != nil {
				return err
			}
			defer s.Close()
			return run(cmd, s, args)
		}
	}
	var asJSON, showPHI bool
	// filter is the rows a subcommand's FILTER flags select; each of list,
	// replay and discard has its own flag set.
	filter := func(c *cobra.Command, args []string) (outbox.DeadFilter, error) {
		var f outbox.DeadFilter
		var err error
		if f.IDs, err = parseIDs(args); err != nil {
			return f, err
		}
		f.Sink, _ = c.Flags().GetString("sink")
		f.Kind, _ = c.Flags().GetString("kind")
		f.Passed, _ = c.Flags().GetBool("passed")
		now := time.Now().UTC()
		for _, b := range []struct {
			flag string
			to   *time.Time
		}{{"since", &f.Since}, {"until", &f.Until}} {
			v, _ := c.Flags().GetString(b.flag)
			if v == "" {
				continue
			}
			if *b.to, err = parseWhen(v, now); err != nil {
				return f, usageError("--%s: %v", b.flag, err)
			}
		}
		return f, nil
	}
	filterFlags := func(c *cobra.Command) {
		c.Flags().String("sink", "", "only rows of this sink")
		c.Flags().String("kind", "", "only rows of this effect kind")
		c.Flags().Bool("passed", false, "only claim events that a later event of the same claim (a correction or void) passed: delivered after they died")
		c.Flags().String("since", "", "only rows dead-lettered at or after this time (RFC 3339, or a duration back from now)")
		c.Flags().String("until", "", "only rows dead-lettered before this time (RFC 3339, or a duration back from now)")
	}
	// selection is the filter of a replay or discard, which must name its
	// rows: by id, by a filter, or --all.
	selection := func(c *cobra.Command, args []string, verb string) (outbox.DeadFilter, error) {
		f, err := filter(c, args)
		if err != nil {
			return f, err
		}
		if all, _ := c.Flags().GetBool("all"); f.IsZero() && !all {
			return f, usageError("%s: name rows by id, --sink, --kind, --since or --until, or give --all", verb)
		}
		return f, nil
	}
	list := &cobra.Command{Use: "list", Short: "List dead rows", Args: cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, s store.Store, _ []string) error {
			f, err := filter(cmd, nil)
			if err != nil {
				return err
			}
			// Without --show-phi nothing of the payload or the response is
			// printed: the brief rows leave both unread.
			listDead := s.ListDeadBrief
			if showPHI {
				listDead = s.ListDead
			}
			rows, err := listDead(cmd.Context(), f, 10000)
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
	filterFlags(list)
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
			attempts, err := s.Attempts(cmd.Context(), r.ID)
			if err != nil {
				return err
			}
			out["attempts"] = attemptSummaries(attempts, showPHI)
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		})}
	show.Flags().BoolVar(&showPHI, "show-phi", false, "include the effect key in clear, the payload and the receivers' responses (patient data)")
	replay := &cobra.Command{Use: "replay (ID... | FILTER | --all)", Short: "Deliver dead rows again",
		RunE: withStore(func(cmd *cobra.Command, s store.Store, args []string) error {
			f, err := selection(cmd, args, "replay")
			if err != nil {
				return err
			}
			// Rows of a sink this configuration lacks (removed, or
			// renamed) wait for a replica that has it: say so, or
			// they would seem queued and never come.
			unknown := map[string]int{}
			rows, err := s.ListDeadBrief(cmd.Context(), f, 100000)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if _, ok := configured[r.Sink]; !ok {
					unknown[r.Sink]++
				}
			}
			passed := f
			passed.Passed = true
			nPassed, err := s.CountDead(cmd.Context(), passed)
			if err != nil {
				return err
			}
			n, err := s.Replay(cmd.Context(), f, time.Now().UTC())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%d rows queued for delivery again\n", n)
			if nPassed > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d of them are claim events a later event of the same claim (a "+
					"correction or void) passed while they were dead: they arrive after it, out of the claim's order "+
					"(a receiver applying events as they come would take the older claim back; before a replay, "+
					"ediwatch dlq list --passed lists such rows)\n",
					nPassed)
			}
			for _, name := range slices.Sorted(maps.Keys(unknown)) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d of them go to sink %q, which this configuration does not define: "+
					"they stay pending until a replica whose configuration has it runs\n", unknown[name], name)
			}
			return nil
		})}
	filterFlags(replay)
	replay.Flags().Bool("all", false, "every dead row")
	discard := &cobra.Command{Use: "discard (ID... | FILTER | --all)", Short: "Resolve dead rows without delivering them",
		RunE: withStore(func(cmd *cobra.Command, s store.Store, args []string) error {
			f, err := selection(cmd, args, "discard")
			if err != nil {
				return err
			}
			n, err := s.Discard(cmd.Context(), f, time.Now().UTC())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%d rows discarded\n", n)
			return nil
		})}
	filterFlags(discard)
	discard.Flags().Bool("all", false, "every dead row")
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

// parseWhen reads a time given as RFC 3339 or as a duration back from now.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration such as 36h", v)
	}
	return now.Add(-d), nil
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

// attemptSummaries describes a row's attempt history, oldest first; the
// response excerpts (patient data) only when showPHI.
func attemptSummaries(attempts []outbox.Attempt, showPHI bool) []map[string]any {
	out := make([]map[string]any, 0, len(attempts))
	for _, a := range attempts {
		m := map[string]any{"seq": a.Seq, "attempt": a.Number, "at": a.At, "status": a.HTTPStatus,
			"latency_ms": float64(a.Latency.Microseconds()) / 1000, "class": a.Class, "error": a.Error,
			"response_size": a.ResponseSize}
		if showPHI {
			m["response"] = a.Response
		}
		out = append(out, m)
	}
	return out
}
