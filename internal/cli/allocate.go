package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/decode"
)

type allocateOptions struct {
	*globalOptions
	node     string
	strategy string
	output   string
}

func newAllocateCommand(g *globalOptions) *cobra.Command {
	o := &allocateOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "allocate -f FILE|DIR|- ... [--node NAME] [--strategy first-fit|best-fit]",
		Short: "Allocate devices for the pending ResourceClaims, as kube-scheduler would",
		Long: `allocate reads Nodes, DeviceClasses, ResourceSlices and ResourceClaims.
Claims with status.allocation are in use; all the others are allocated
together, as the scheduler does for the claims of one pod. With --node they
are allocated on that node; without it, on the first node of the input on
which they fit. The updated claims are printed (status.allocation filled),
ready to be fed back in or applied.

first-fit picks the devices kube-scheduler 1.37 picks; best-fit prefers the
devices that leave the most other devices allocatable. Every DRA feature
gate is on; --feature-gates turns gates off as a cluster would
(--feature-gates DRAConsumableCapacity=false,DRAFractionalCapacityRange=false).

Exit codes: 0 allocated; 1 the claims do not fit (the explanation is
printed to stderr); 2 invalid input, or a fatal error such as an invalid
resource pool when no node fits.`,
		Example: `  dractl allocate -f examples/a100-mig-mixins
  dractl allocate -f examples/tpu-multihost --node node-5 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	cmd.Flags().StringVar(&o.node, "node", "", "allocate on this node only (default: the first node that fits)")
	cmd.Flags().StringVar(&o.strategy, "strategy", "first-fit", "device choice: first-fit or best-fit")
	addFeatureGatesFlag(cmd, &o.featureGates)
	addOutputFlag(cmd, &o.output)
	return cmd
}

func (o *allocateOptions) run(ctx context.Context) error {
	if err := o.requireInputs(); err != nil {
		return err
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	strategy, err := parseStrategy(o.strategy)
	if err != nil {
		return err
	}
	gates, err := parseFeatureGates(o.featureGates)
	if err != nil {
		return err
	}
	c, err := o.readCluster(o.Err, strategy, gates)
	if err != nil {
		return err
	}
	if len(c.pending) == 0 {
		fmt.Fprintln(o.Err, "no pending ResourceClaims: every claim in the input is already allocated")
		return nil
	}
	nodes, err := c.nodes(o.node)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var unfit []*allocator.UnfitError
	for _, node := range nodes {
		results, err := c.allocate(ctx, node, c.pending)
		if allocator.IsUnfit(err) {
			unfit = append(unfit, err.(*allocator.UnfitError))
			continue
		}
		if err != nil {
			return fatal(err)
		}
		out := make([]any, len(c.pending))
		for i, claim := range c.pending {
			claim = claim.DeepCopy()
			claim.Status.Allocation = results[i]
			out[i] = claim
		}
		fmt.Fprintf(o.Err, "allocated %s on node %s\n", plural(len(out), "claim"), node.Name)
		if err := decode.Encode(o.Out, out, o.output); err != nil {
			return writeError(err)
		}
		return nil
	}
	return reportUnfit(o, unfit)
}

// reportUnfit explains every node tried. Upstream treats invalid pools as
// a per-node failure and surfaces them only when no node fits (KEP-4815
// §"Validation moved from admission to runtime"; kube-scheduler reports
// them in the pod status), so that is when they turn the outcome into an
// error.
func reportUnfit(o *allocateOptions, unfit []*allocator.UnfitError) error {
	invalid := map[string]string{}
	for _, u := range unfit {
		writeExplanation(o.Err, u.Explanation)
		for _, p := range u.Explanation.InvalidPools {
			invalid[p.Pool.String()] = p.Error()
		}
	}
	if len(invalid) > 0 {
		msgs := make([]string, 0, len(invalid))
		for _, m := range invalid {
			msgs = append(msgs, m)
		}
		return &exitError{code: ExitUsage, msg: "no node fits and invalid resource pools were encountered: " + strings.Join(sortedCopy(msgs), "; ")}
	}
	return &exitError{code: ExitInvalid, msg: fmt.Sprintf("the claims do not fit on %s", plural(len(unfit), "node"))}
}
