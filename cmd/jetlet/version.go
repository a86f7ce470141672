package main

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise
// it is read from the module's build information.
var version = ""

func jetletVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// buildInfo is jetlet_build_info: 1, labelled with what was built.
func buildInfo() prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "jetlet_build_info",
		Help:        "1, labelled with jetlet's version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": jetletVersion(), "revision": revision, "goversion": goruntime.Version()},
	})
	g.Set(1)
	return g
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print jetlet's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "jetlet %s\n", jetletVersion())
			return err
		},
	}
}
