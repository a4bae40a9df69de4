package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/live"
)

type explainOptions struct {
	*globalOptions
	cluster *clusterOptions
	node    string
	claim   string
}

func newExplainCommand(g *globalOptions) *cobra.Command {
	o := &explainOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "explain (-f FILE|DIR|- ... [--claim NAME] | pod/NAME) [--node NAME]",
		Short: "Explain, per node and request, why a ResourceClaim does or does not fit",
		Long: `explain tries one pending claim (or, without --claim, all pending claims
together) on each node (or the one named) and prints, for every request,
how many devices were candidates and how many were rejected for each
reason: class or request selector, node, taint, already allocated, counter
<set>/<counter> exhausted, capacity, constraint, incomplete or invalid pool.

explain pod/NAME explains a pod's claims, named and from templates: for a
pending pod, per node, why its pending claims do or do not fit (a node
outside the node selector of an already allocated claim of the pod does
not fit either); for a scheduled pod, which devices its claims hold. It
reads the cluster (kubectl's flags: --kubeconfig, --context, -n, ...), or,
with -f, files such as those dractl snapshot writes. Only DRA is
considered: kube-scheduler's other filters (resources, taints, affinity)
are not.

Exit codes: 0 the explanation was printed; 2 invalid input, a fatal error,
or a cluster that could not be read.`,
		Example: `  dractl explain -f examples/dgx-h100-mixins --claim mig-1g-10gb
  dractl explain pod/trainer -n ml
  kubectl dra explain pod/trainer --node gpu-node-7`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return o.runPod(cmd.Context(), args[0])
			}
			return o.run(cmd.Context())
		},
	}
	o.cluster = addClusterFlags(cmd)
	cmd.Flags().StringVar(&o.node, "node", "", "explain for this node only (default: every node of the input)")
	cmd.Flags().StringVar(&o.claim, "claim", "", "name of the pending ResourceClaim to explain (default: all pending claims)")
	return cmd
}

func (o *explainOptions) run(ctx context.Context) error {
	if err := o.requireInputs(); err != nil {
		return err
	}
	c, err := o.readCluster(o.Err, allocator.FirstFit)
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
			writeFit(o.Out, node.Name, claims, results)
		}
	}
	return nil
}

// runPod explains pod/NAME, from the files given with -f or else from the
// cluster.
func (o *explainOptions) runPod(ctx context.Context, arg string) error {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" || (kind != "pod" && kind != "pods" && kind != "po") {
		return usageErrorf("explain: expected pod/NAME, found %q", arg)
	}
	if o.claim != "" {
		return usageErrorf("--claim: not with pod/NAME, which explains the pod's own claims")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ns, err := o.cluster.namespace()
	if err != nil {
		return err
	}
	if len(o.filenames) > 0 {
		return o.podFromFiles(ctx, ns, name)
	}
	c, err := o.cluster.client()
	if err != nil {
		return err
	}
	pod, err := c.Pod(ctx, ns, name)
	if err != nil {
		return clusterError(err)
	}
	kinds := live.KindSlices | live.KindClasses | live.KindClaims
	if pod.Spec.NodeName == "" {
		kinds |= live.KindNodes
	}
	objs, err := c.Read(ctx, kinds)
	if err != nil {
		return clusterError(err)
	}
	st, err := objs.State()
	if err != nil {
		return clusterError(err)
	}
	src := &podSource{snap: st.Snapshot(), nodes: objs.Nodes,
		templates: func(ns, name string) (*resourcev1.ResourceClaimTemplate, error) {
			t, err := c.ClaimTemplate(ctx, ns, name)
			if err != nil {
				return nil, clusterError(err)
			}
			return t, nil
		}}
	return explainPod(ctx, o.Out, src, pod, o.node)
}

// podFromFiles explains a pod read with -f, such as a snapshot's.
func (o *explainOptions) podFromFiles(ctx context.Context, ns, name string) error {
	c, err := o.readCluster(o.Err, allocator.FirstFit)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(c.set.Pods, func(p *corev1.Pod) bool { return p.Namespace == ns && p.Name == name })
	if i < 0 {
		return usageErrorf("pod %s/%s: no such Pod in the input", ns, name)
	}
	src := &podSource{snap: c.snap, nodes: c.set.Nodes,
		templates: func(ns, name string) (*resourcev1.ResourceClaimTemplate, error) {
			for _, t := range c.set.ClaimTemplates {
				if t.Namespace == ns && t.Name == name {
					return t, nil
				}
			}
			return nil, usageErrorf("ResourceClaimTemplate %s/%s: not in the input", ns, name)
		}}
	return explainPod(ctx, o.Out, src, c.set.Pods[i], o.node)
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
