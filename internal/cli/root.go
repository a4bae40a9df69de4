// Package cli implements the dractl commands, one file per verb. Commands
// run in-process against the Streams they are given, which is what the
// golden tests in this package rely on.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dractl/dractl/pkg/core/validation"
)

// Streams are the standard streams a command reads and writes.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// inputOptions are the flags the verbs that read input share
// (addInputFlags), and the streams every verb writes to.
type inputOptions struct {
	Streams
	filenames      []string
	recursive      bool
	maxObjectBytes string
	// featureGates is --feature-gates of the verbs that allocate.
	featureGates string
	// kubeVersion is --kube-version of the verbs that judge input as
	// kube-apiserver admission would.
	kubeVersion string
	// allocateAs is the minor whose kube-scheduler the allocator answers
	// as: allocate's --kube-version. Nil, for the verbs that explain or
	// simulate, keeps the allocator's default.
	allocateAs *validation.KubeVersion
}

// Execute runs dractl with the process's arguments and streams and returns
// the exit code.
func Execute() int {
	stop, err := startProfiling()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		return ExitUsage
	}
	defer stop()
	return RunAs(context.Background(), filepath.Base(os.Args[0]), os.Args[1:], Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
}

// PluginName is the executable name under which kubectl runs dractl as a
// plugin: `kubectl dra ...` executes kubectl-dra from $PATH.
const PluginName = "kubectl-dra"

// Run runs dractl with args and returns the exit code. It never calls
// os.Exit, so tests can run any command line in-process.
func Run(args []string, s Streams) int { return RunAs(context.Background(), "dractl", args, s) }

// RunAs is Run for an executable called name (as PluginName, help and
// errors speak of "kubectl dra"); ctx ends long-running verbs such as
// monitor.
func RunAs(ctx context.Context, name string, args []string, s Streams) int {
	root := newRootCommand(s)
	if name == PluginName {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl dra"}
	}
	root.SetArgs(args)
	var err error
	if len(args) > 0 && isUnknownCommand(root, args[0]) {
		// Before cobra parses the flags, which the root does not have:
		// "dractl valdate -f x" is a mistyped verb, not a wrong flag.
		err = unknownCommand(root, args[0])
	} else {
		err = root.ExecuteContext(ctx)
	}
	if err != nil && err.Error() != "" {
		if ee, ok := err.(*exitError); !ok || ee.msg != "" {
			fmt.Fprintf(s.Err, "error: %s\n", err)
			if !ok {
				// Cobra's own flag and argument errors: point at the help
				// the way kubectl does.
				fmt.Fprintf(s.Err, "See '%s --help' for usage.\n", commandPath(root, args))
			}
		}
	}
	return exitCode(err)
}

func newRootCommand(s Streams) *cobra.Command {
	o := &inputOptions{Streams: s}
	root := &cobra.Command{
		Use:   "dractl",
		Short: "Validate, flatten and compact Kubernetes DRA ResourceSlices",
		Long: `dractl checks and transforms the ResourceSlices a DRA driver publishes,
including partitionable devices (KEP-4815) and ResourceSlice mixins (KEP-5234).

Inputs are given with -f: a file, a directory (every .yaml, .yml and .json
file in it; with -R also those below it) or - for standard input; -f may be
repeated.

Exit codes:
  0  success; every input is valid
  1  an input is invalid (decode, admission or pool error)
  2  usage error, or an input could not be read or holds no objects
allocate and explain differ: 1 means the claims do not fit, and invalid
input is 2 (see their --help).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a verb there is nothing to do; show help rather than
		// succeed silently.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return cmd.Help()
		},
		Args: cobra.ArbitraryArgs,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	// cobra's completion verb: dractl completion bash|zsh|fish|powershell.
	root.CompletionOptions.HiddenDefaultCmd = false
	root.SuggestionsMinimumDistance = 2

	for _, cmd := range []*cobra.Command{
		newValidateCommand(o),
		newFlattenCommand(o),
		newCompactCommand(o),
		newAllocateCommand(o),
		newExplainCommand(o),
		newDescribeCommand(o),
		newGetCommand(o),
		newSimulateCommand(o),
	} {
		o.addInputFlags(cmd)
		root.AddCommand(cmd)
	}
	// The verbs that only read a cluster take no -f.
	root.AddCommand(newVersionCommand(o), newSnapshotCommand(o), newMonitorCommand(o))
	return root
}

// isUnknownCommand reports whether name, the first argument, is meant
// for a verb dractl does not have: not a flag, and none of the verbs,
// cobra's own (help, completion and its hidden __complete) included.
func isUnknownCommand(root *cobra.Command, name string) bool {
	if strings.HasPrefix(name, "-") || strings.HasPrefix(name, "__") || name == "help" || name == "completion" {
		return false
	}
	for _, c := range root.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return false
		}
	}
	return true
}

// unknownCommand is the error for a verb dractl does not have, with the
// verbs it may have meant, as kubectl words it.
func unknownCommand(root *cobra.Command, name string) error {
	hint := ""
	if s := root.SuggestionsFor(name); len(s) > 0 {
		hint = "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
	}
	return usageErrorf("unknown command %q for %q%s\nRun '%s --help' for usage.", name, root.DisplayName(), hint, root.DisplayName())
}

// commandPath names the subcommand a command line was meant for, for the
// usage hint after a flag error.
func commandPath(root *cobra.Command, args []string) string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return root.Name()
	}
	return cmd.CommandPath()
}

// requireInputs rejects a command line without -f: reading stdin implicitly
// would make a forgotten -f hang in a terminal.
func (o *inputOptions) requireInputs() error {
	if len(o.filenames) == 0 {
		return usageErrorf("no input: pass -f FILE, -f DIR or -f - (stdin)")
	}
	return nil
}

// addOutputFlag registers -o for the verbs that print objects.
func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "yaml", "output format: yaml or json")
}

func checkOutput(output string) error {
	switch output {
	case "yaml", "json":
		return nil
	}
	return usageErrorf("--output: expected yaml or json, found %q", output)
}
