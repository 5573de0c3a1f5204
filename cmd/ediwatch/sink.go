package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/user"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ediwatch/ediwatch/internal/config"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
)

func newSinkCmd(stdout io.Writer) *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "List, disable or enable delivery sinks",
		Long: `sink shows and changes whether the relays deliver to a sink, as the
configured store records it for every replica.

  sink list [--json]                    every configured sink: URL (redacted),
                                        enabled or disabled, since when, why,
                                        and its pending and dead rows
  sink disable NAME [--reason TEXT]     stop delivering to NAME; its rows wait
  sink enable NAME                      deliver again what waited, at once

A receiver that answers 410 Gone disables its sink the same way (reason
"HTTP 410 Gone"). A disabled sink's rows stay pending: no attempt is
counted, and relay.max_age does not run out while they wait, since
enabling restarts their age budget (as dlq replay does).`,
	}
	cmd.PersistentFlags().StringVar(&cfgPath, "config", "", "configuration file")
	withStore := func(run func(ctx context.Context, cfg config.Config, s store.Store, args []string) error) func(*cobra.Command, []string) error {
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
			return run(cmd.Context(), cfg, s, args)
		}
	}
	var asJSON bool
	list := &cobra.Command{Use: "list", Short: "List the sinks and whether each is enabled", Args: cobra.NoArgs,
		RunE: withStore(func(ctx context.Context, cfg config.Config, s store.Store, _ []string) error {
			views, err := sinkViews(ctx, cfg, s)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				for _, v := range views {
					if err := enc.Encode(v); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SINK\tSTATE\tSINCE\tPENDING\tDEAD\tURL\tREASON")
			for _, v := range views {
				since := "-"
				if v.Since != nil {
					since = v.Since.Format(time.RFC3339)
				}
				reason := v.Reason
				if v.By != "" {
					reason += " (by " + v.By + ")"
				}
				url := v.URL
				if !v.Configured {
					url = "(not configured)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", v.Name, v.State, since, v.Pending, v.Dead, url, reason)
			}
			return tw.Flush()
		})}
	list.Flags().BoolVar(&asJSON, "json", false, "one JSON object per sink")
	var reason string
	disable := &cobra.Command{Use: "disable NAME", Short: "Stop delivering to a sink; its rows wait", Args: cobra.ExactArgs(1),
		RunE: withStore(func(ctx context.Context, cfg config.Config, s store.Store, args []string) error {
			name := args[0]
			if err := knownSink(ctx, cfg, s, name); err != nil {
				return err
			}
			now := time.Now().UTC()
			changed, err := s.DisableSink(ctx, name, reason, operator(), now, now)
			if err != nil {
				return err
			}
			if !changed {
				st := stateOf(ctx, s, name)
				fmt.Fprintf(stdout, "sink %s was already disabled since %s (%s)\n", name, st.Since.Format(time.RFC3339), st.Reason)
				return nil
			}
			fmt.Fprintf(stdout, "sink %s disabled: its rows wait until `ediwatch sink enable %s`\n", name, name)
			return nil
		})}
	disable.Flags().StringVar(&reason, "reason", "disabled by an operator", "why, shown by sink list")
	enable := &cobra.Command{Use: "enable NAME", Short: "Deliver to a disabled sink again", Args: cobra.ExactArgs(1),
		RunE: withStore(func(ctx context.Context, cfg config.Config, s store.Store, args []string) error {
			name := args[0]
			if err := knownSink(ctx, cfg, s, name); err != nil {
				return err
			}
			changed, err := s.EnableSink(ctx, name, time.Now().UTC())
			if err != nil {
				return err
			}
			if !changed {
				fmt.Fprintf(stdout, "sink %s was not disabled\n", name)
				return nil
			}
			pending := 0
			if stats, err := s.Stats(ctx, time.Now().UTC()); err == nil {
				for _, st := range stats {
					if st.Sink == name {
						pending = st.Pending
					}
				}
			}
			fmt.Fprintf(stdout, "sink %s enabled: %d rows waiting are due now\n", name, pending)
			return nil
		})}
	cmd.AddCommand(list, disable, enable)
	return cmd
}

// sinkView is one line of `sink list`.
type sinkView struct {
	Name       string     `json:"name"`
	URL        string     `json:"url"`
	Configured bool       `json:"configured"`
	State      string     `json:"state"` // enabled | disabled
	Since      *time.Time `json:"since,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	By         string     `json:"by,omitempty"`
	Pending    int        `json:"pending"`
	Inflight   int        `json:"inflight"`
	Dead       int        `json:"dead"`
}

// sinkViews describes every configured sink, and every sink the store
// holds a state for that is no longer configured (its rows wait too).
func sinkViews(ctx context.Context, cfg config.Config, s store.Store) ([]sinkView, error) {
	states, err := s.SinkStates(ctx)
	if err != nil {
		return nil, err
	}
	stats, err := s.Stats(ctx, time.Now().UTC())
	if err != nil {
		return nil, err
	}
	views := map[string]*sinkView{}
	for name, sc := range cfg.Sinks {
		views[name] = &sinkView{Name: name, URL: sink.RedactURL(sc.URL), Configured: true, State: "enabled"}
	}
	for _, st := range states {
		v, ok := views[st.Sink]
		if !ok {
			v = &sinkView{Name: st.Sink, State: "enabled"}
			views[st.Sink] = v
		}
		since := st.Since
		v.Since, v.Reason, v.By = &since, st.Reason, st.By
		if st.Disabled {
			v.State = "disabled"
		}
	}
	for _, st := range stats {
		if v, ok := views[st.Sink]; ok {
			v.Pending, v.Inflight, v.Dead = st.Pending, st.Inflight, st.Dead
		}
	}
	out := make([]sinkView, 0, len(views))
	for _, v := range views {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// knownSink returns a usage error unless name is a configured sink or one
// the store holds a state for.
func knownSink(ctx context.Context, cfg config.Config, s store.Store, name string) error {
	if _, ok := cfg.Sinks[name]; ok {
		return nil
	}
	states, err := s.SinkStates(ctx)
	if err != nil {
		return err
	}
	for _, st := range states {
		if st.Sink == name {
			return nil
		}
	}
	names := make([]string, 0, len(cfg.Sinks))
	for n := range cfg.Sinks {
		names = append(names, n)
	}
	slices.Sort(names)
	return usageError("no sink named %q (configured: %s)", name, strings.Join(names, ", "))
}

func stateOf(ctx context.Context, s store.Store, name string) outbox.SinkState {
	states, _ := s.SinkStates(ctx)
	for _, st := range states {
		if st.Sink == name {
			return st
		}
	}
	return outbox.SinkState{Sink: name}
}

// operator names who runs the command, for sink list.
func operator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "operator " + u.Username
	}
	return "operator"
}
