package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo is what `starflow version` says of the binary.
type buildInfo struct {
	// Version is -ldflags "-X main.version=…" when set, else the module
	// version the binary was built from ("v1.2.0" by `go install
	// …@v1.2.0`, "(devel)" from a work tree).
	Version string `json:"version"`
	// Module is the main module's path.
	Module string `json:"module"`
	// Commit is the VCS revision the binary was built from, "" when the
	// build recorded none (-buildvcs=false, a module download);
	// Modified says the work tree had uncommitted changes.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// CommitTime is the commit's time (RFC 3339), "" when unknown.
	CommitTime string `json:"commit_time,omitempty"`
	// Go is the Go toolchain's version; Platform GOOS/GOARCH.
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Chaos is true in a -tags chaos build, which reads STARFLOW_FAULTS
	// and STARFLOW_CHAOS_CLOCK_SKEW (docs/faults.md); absent otherwise.
	Chaos bool `json:"chaos,omitempty"`
}

// readBuildInfo reads the binary's build information.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Module: "github.com/starflow/starflow", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Chaos: chaosBuild}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if bi.Main.Path != "" {
		b.Module = bi.Main.Path
	}
	if version == "dev" && bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and the Go version this binary was built with",
		Long: `Print the binary's version (set at build time with -ldflags "-X main.version=…", else the
module version: "(devel)" for a build from a work tree), its module path, the commit it was built
from (when the build recorded one; "+modified" when the tree had uncommitted changes), and the Go
version and platform. --json prints the same as one JSON object.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := readBuildInfo()
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(b)
			}
			commit := b.Commit
			switch {
			case commit == "":
				commit = "unknown (not recorded by the build)"
			case b.Modified:
				commit += "+modified"
			}
			if b.CommitTime != "" {
				commit += " (" + b.CommitTime + ")"
			}
			fmt.Printf("starflow %s\nmodule   %s\ncommit   %s\ngo       %s %s\n", b.Version, b.Module, commit, b.Go, b.Platform)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
