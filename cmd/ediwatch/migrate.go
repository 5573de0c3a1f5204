package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newMigrateCmd(stdout io.Writer) *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "migrate --config FILE",
		Short: "Apply the store's pending migrations (safe to run from several processes at once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			s, err := openStore(cmd.Context(), cfg.Store, false)
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.Migrate(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s store migrated\n", cfg.Store.Driver)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "configuration file")
	return cmd
}
