package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newCheckConfigCmd(stdout io.Writer) *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "check-config --config FILE",
		Short: "Validate a configuration file (and EDIWATCH_* overrides) without starting anything",
		Long: `check-config loads the configuration as run would and reports every bad key with
its path, the rule and the value (secrets redacted). Exit 0 when valid, 2 when not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "configuration is valid: store %s, %d sources, %d sinks\n",
				cfg.Store.Driver, len(cfg.Sources), len(cfg.Sinks))
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "configuration file")
	return cmd
}
