package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dractl/dractl/pkg/ops/live"
)

func newSnapshotCommand(g *inputOptions) *cobra.Command {
	var cluster *clusterOptions
	cmd := &cobra.Command{
		Use:   "snapshot DIR",
		Short: "Write the cluster's DRA objects, Nodes and pending Pods to files",
		Long: `snapshot reads every ResourceSlice, DeviceClass, ResourceClaim,
ResourceClaimTemplate, DeviceTaintRule and Node of the cluster and the pods
not bound to a node yet, and writes them to DIR, one YAML file per kind
(resourceslices.yaml, deviceclasses.yaml, ...), without managedFields.
Every offline verb reads the directory with -f DIR: validate, allocate,
explain (explain pod/NAME -f DIR too), describe, get pools, simulate.

Exit codes: 0 written; 1 a file could not be written; 2 the cluster could
not be read.`,
		Example: `  dractl snapshot /tmp/cluster
  dractl explain pod/trainer -f /tmp/cluster`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			c, err := cluster.client()
			if err != nil {
				return err
			}
			objs, err := c.Read(ctx, live.KindAll)
			if err != nil {
				return clusterError(err)
			}
			files, err := objs.Snapshot(args[0])
			for _, f := range files {
				fmt.Fprintf(g.Out, "%s: %s\n", f.Path, plural(f.Objects, "object"))
			}
			if err != nil {
				return writeError(err)
			}
			return nil
		},
	}
	cluster = addClusterFlags(cmd, live.DefaultTimeout)
	return cmd
}
