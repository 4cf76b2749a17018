package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set by the Makefile's build target (-ldflags "-X main.version=... -X
// main.commit=...", from git describe and git rev-parse). A binary built otherwise (go build, go
// install) reads them from the build information the Go toolchain embeds.
var (
	version string
	commit  string
)

// buildVersion is what `retryring version` prints.
type buildVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
}

// currentVersion is the binary's version, commit and Go version: the ldflags when set, else the
// module's build information (the module version for go install, "(devel)" for a local build, and
// the VCS revision with "-dirty" for uncommitted changes), else "unknown".
func currentVersion() buildVersion {
	return versionFrom(version, commit, debug.ReadBuildInfo)
}

func versionFrom(ver, rev string, read func() (*debug.BuildInfo, bool)) buildVersion {
	v := buildVersion{Version: ver, Commit: rev, GoVersion: runtime.Version()}
	if info, ok := read(); ok {
		if v.Version == "" {
			v.Version = info.Main.Version
		}
		if info.GoVersion != "" {
			v.GoVersion = info.GoVersion
		}
		modified := false
		revision := ""
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if v.Commit == "" && revision != "" {
			v.Commit = revision
			if modified {
				v.Commit += "-dirty"
			}
		}
	}
	if v.Version == "" {
		v.Version = "unknown"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

func (v buildVersion) String() string {
	return fmt.Sprintf("retryring %s (commit %s, %s)", v.Version, v.Commit, v.GoVersion)
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout(), currentVersion(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, or json")
	return cmd
}

func printVersion(w io.Writer, v buildVersion, output string) error {
	switch output {
	case "text":
		_, err := fmt.Fprintln(w, v)
		return err
	case "json":
		return json.NewEncoder(w).Encode(v)
	}
	return fmt.Errorf("-o: want text or json, got %q", output)
}
