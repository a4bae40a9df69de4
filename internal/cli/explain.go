package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/allocator"
)

type explainOptions struct {
	*globalOptions
	node  string
	claim string
}

func newExplainCommand(g *globalOptions) *cobra.Command {
	o := &explainOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "explain -f FILE|DIR|- ... [--claim NAME] [--node NAME]",
		Short: "Explain, per node and request, why a ResourceClaim does or does not fit",
		Long: `explain tries one pending claim (or, without --claim, all pending claims
together) on each node (or the one named) and prints, for every request,
how many devices were candidates and how many were rejected for each
reason: class or request selector, node, taint, already allocated, counter
<set>/<counter> exhausted, capacity, constraint, incomplete or invalid pool.

Exit codes: 0 the explanation was printed; 2 invalid input or a fatal error.`,
		Example: `  dractl explain -f examples/dgx-h100-mixins --claim mig-1g-10gb`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	cmd.Flags().StringVar(&o.node, "node", "", "explain for this node only (default: every node of the input)")
	cmd.Flags().StringVar(&o.claim, "claim", "", "name of the pending ResourceClaim to explain (default: all pending claims)")
	addFeatureGatesFlag(cmd, &o.featureGates)
	return cmd
}

func (o *explainOptions) run(ctx context.Context) error {
	if err := o.requireInputs(); err != nil {
		return err
	}
	gates, err := parseFeatureGates(o.featureGates)
	if err != nil {
		return err
	}
	c, err := o.readCluster(o.Err, allocator.FirstFit, gates)
	if err != nil {
		return err
	}
	claims := c.pending
	if o.claim != "" {
		i := slices.IndexFunc(c.pending, func(cl *resourcev1.ResourceClaim) bool { return cl.Name == o.claim })
		if i < 0 {
			return usageErrorf("--claim %s: no pending ResourceClaim of that name in the input", o.claim)
		}
		claims = c.pending[i : i+1]
	}
	if len(claims) == 0 {
		fmt.Fprintln(o.Out, "no pending ResourceClaims: every claim in the input is already allocated")
		return nil
	}
	nodes, err := c.nodes(o.node)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	for _, node := range nodes {
		results, err := c.allocate(ctx, node, claims)
		switch {
		case allocator.IsUnfit(err):
			writeExplanation(o.Out, err.(*allocator.UnfitError).Explanation)
		case err != nil:
			return fatal(err)
		default:
			fmt.Fprintf(o.Out, "node %s: fits\n", node.Name)
			for i, r := range results {
				for _, d := range r.Devices.Results {
					fmt.Fprintf(o.Out, "  %s/%s request %s: %s/%s/%s\n", claims[i].Namespace, claims[i].Name, d.Request, d.Driver, d.Pool, d.Device)
				}
			}
		}
	}
	return nil
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
