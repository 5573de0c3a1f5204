package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion describes this binary from its build info: the module
// version, the VCS revision it was built from (marked "+dirty" when the
// tree had changes) and the Go version.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "ediwatch (no build info)"
	}
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	revision, when, dirty := "unknown", "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		revision += "+dirty"
	}
	out := fmt.Sprintf("ediwatch %s revision %s", version, revision)
	if when != "" {
		out += " (" + when + ")"
	}
	return out + " " + info.GoVersion
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version, VCS revision and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, buildVersion())
			return err
		},
	}
}
