package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// version is set at link time by release builds:
//
//	go build -ldflags "-X github.com/dractl/dractl/internal/cli.version=v1.2.3"
//
// Otherwise it comes from the module version go install records. commit
// is set the same way (the Makefile passes both); without it, the commit
// comes from the VCS information the toolchain records.
var (
	version = ""
	commit  = ""
)

type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"` // empty when the build recorded none
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	return v
}

func newVersionCommand(o *inputOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the dractl version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			switch output {
			case "":
				fmt.Fprintf(o.Out, "dractl %s", v.Version)
				if v.Commit != "" {
					fmt.Fprintf(o.Out, " (commit %.12s", v.Commit)
					if v.Modified {
						fmt.Fprint(o.Out, ", modified")
					}
					fmt.Fprint(o.Out, ")")
				}
				fmt.Fprintf(o.Out, " %s %s\n", v.GoVersion, v.Platform)
			case "json":
				b, _ := json.MarshalIndent(v, "", "  ")
				fmt.Fprintf(o.Out, "%s\n", b)
			case "yaml":
				b, _ := yaml.Marshal(v)
				fmt.Fprintf(o.Out, "%s", b)
			default:
				return usageErrorf("--output: expected yaml or json, found %q", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (default: one line)")
	return cmd
}
