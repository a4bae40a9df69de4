package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/manifest"
)

type allocateOptions struct {
	*inputOptions
	node     string
	strategy string
	output   string
}

func newAllocateCommand(g *inputOptions) *cobra.Command {
	o := &allocateOptions{inputOptions: g}
	cmd := &cobra.Command{
		Use:   "allocate -f FILE|DIR|- ... [--node NAME] [--strategy first-fit|best-fit]",
		Short: "Allocate devices for the pending ResourceClaims, as kube-scheduler would",
		Long: `allocate reads Nodes, DeviceClasses, ResourceSlices, ResourceClaims,
ResourceClaimTemplates and Pods. Claims with status.allocation are in use.
Each Pod's claims (spec.resourceClaims: named claims, and claims made from
templates as the resourceclaim controller makes them) are allocated
together, on a node the pod may use (its nodeName, nodeSelector and
required node affinity); pods go one after the other, in input order.
A pod that asks for an extended resource a DeviceClass backs
(spec.extendedResourceName, or deviceclass.resource.kubernetes.io/<class>)
gets the claim kube-scheduler would create for it on each node that does
not advertise the resource in status.allocatable (a device plugin's
resource takes precedence). Pending claims that no pod uses are allocated
together first, as for one pod. With --node only that node is tried; without it, every node of the
input in order, and the first on which the claims fit is taken. Without
Node objects, the nodes are those the ResourceSlices name. The updated
claims are printed (status.allocation filled, and for a pod's claims
status.reservedFor), ready to be fed back in or applied. They name their
pod by its metadata.uid (ownerReferences, reservedFor); a pod read without
one gets, as every verb reads it, a UID derived from its namespace and
name (a name-based UUID), so that the output read back with the pod refers
to it.

first-fit picks the devices kube-scheduler picks; best-fit prefers the
devices that put the least of their GPU (counter set) out of other devices'
reach. Both answer as the kube-scheduler of the minor --kube-version names
(default: the newest), where its allocator changed between minors
(docs/versions.md). Every DRA feature
gate is on; --feature-gates turns gates off as a cluster would
(--feature-gates DRAConsumableCapacity=false,DRAFractionalCapacityRange=false).

Pods are independent, as in kube-scheduler: a pod whose claims fit
nowhere is explained on stderr and the others are still allocated and
printed. A claim that pods share is allocated for the first of them and
reserved for each, and a pod's allocated claims keep it to the nodes
their allocation names.

Exit codes: 0 allocated; 1 some pod's claims do not fit (the explanation
is printed to stderr); 2 invalid input, or a fatal error such as an
invalid resource pool when no node fits.`,
		Example: `  dractl allocate -f examples/a100-mig-mixins
  dractl allocate -f examples/dgx-h100-mixins --strategy best-fit
  dractl allocate -f examples/a100-mig-mixins --node a100-node -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	cmd.Flags().StringVar(&o.node, "node", "", "allocate on this node only (default: the first node that fits)")
	cmd.Flags().StringVar(&o.strategy, "strategy", "first-fit", "device choice: first-fit or best-fit")
	addFeatureGatesFlag(cmd, &o.featureGates)
	addKubeVersionFlag(cmd, &o.kubeVersion)
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
	target, err := o.targetVersion()
	if err != nil {
		return err
	}
	as := judgedAs(target)
	o.allocateAs = &as
	c, problems, err := o.readCluster(strategy, "allocated")
	if err != nil {
		printProblems(o.Err, problems)
		return err
	}
	if !slices.ContainsFunc(c.groups, func(g *group) bool { return len(c.pending(g)) > 0 || g.ext != nil }) {
		fmt.Fprintln(o.Err, "no pending ResourceClaims: every claim in the input, and every claim of its pods, is already allocated")
		return nil
	}
	nodes, err := c.nodes(o.node, o.Err)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var out []any
	// made are the claims allocated here, as printed: a pod after the one
	// they were allocated for that shares them is added to their
	// reservedFor, as kube-scheduler reserves a shared claim for every pod
	// it binds.
	made := map[state.ClaimKey]*resourcev1.ResourceClaim{}
	// Pods are independent, as in kube-scheduler: one that fits nowhere
	// is explained and the others are still allocated; the exit code is
	// the worst of them.
	var failed *exitError
	for _, g := range c.groups {
		pending := c.pending(g)
		shared := c.madeFor(g, made)
		if len(pending) == 0 && len(shared) == 0 && g.ext == nil {
			continue
		}
		var claims []*resourcev1.ResourceClaim
		var err error
		if len(pending) == 0 && g.ext == nil {
			err = o.placeSharing(c, g, shared, nodes)
		} else {
			claims, err = o.allocateGroup(ctx, c, g, pending, nodes)
		}
		if err == nil {
			for _, claim := range shared {
				reserve(claim, g.pod)
			}
		}
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			fmt.Fprintf(o.Err, "error: %s\n", ee.msg)
			if failed == nil || ee.code > failed.code {
				failed = &exitError{code: ee.code}
			}
			continue
		case err != nil:
			return err
		}
		for _, claim := range claims {
			made[state.KeyOf(claim)] = claim
			out = append(out, claim)
		}
	}
	if err := manifest.Write(o.Out, out, o.output); err != nil {
		return writeError(err)
	}
	if failed != nil {
		return failed
	}
	return nil
}

// allocateGroup allocates one group's pending claims on the first node
// that its pod may use and on which they fit, and records the result for
// the groups after it.
func (o *allocateOptions) allocateGroup(ctx context.Context, c *cluster, g *group, pending []*resourcev1.ResourceClaim, nodes []*corev1.Node) ([]*resourcev1.ResourceClaim, error) {
	var unfit []*allocator.UnfitError
	// unusable are the nodes that cannot be used at all (from 1.38, an All
	// request over an invalid pool); like an unfit node, another may do.
	var unusable []*allocator.NodeError
	var excluded []string
	allocated := c.allocatedOf(g)
	for _, node := range nodes {
		if why := g.excluded(node, allocated); why != "" {
			excluded = append(excluded, fmt.Sprintf("node %s: %s", node.Name, why))
			continue
		}
		ext, mappings, why := g.extendedOn(node)
		if why != "" {
			excluded = append(excluded, fmt.Sprintf("node %s: %s", node.Name, why))
			continue
		}
		toAllocate := withExtended(pending, ext)
		if len(toAllocate) == 0 {
			fmt.Fprintf(o.Err, "%s: the device plugins of node %s serve its extended resources; nothing to allocate\n", g, node.Name)
			return nil, nil
		}
		results, err := c.allocate(ctx, node, toAllocate)
		if allocator.IsUnfit(err) {
			unfit = append(unfit, err.(*allocator.UnfitError))
			continue
		}
		var ne *allocator.NodeError
		if errors.As(err, &ne) {
			unusable = append(unusable, ne)
			continue
		}
		if err != nil {
			return nil, fatal(err)
		}
		if ext != nil {
			// The claim kube-scheduler would create: known to the State
			// before its allocation is.
			if err := c.st.SetClaim(ext); err != nil {
				return nil, fmt.Errorf("%s: recording the extended-resource claim: %w", g, err)
			}
		}
		claims := g.allocated(toAllocate, results)
		if err := c.assume(claims); err != nil {
			// The State refused what the allocator found: a bug that
			// would hand a device out twice, so nothing more is answered.
			return nil, fmt.Errorf("%s: recording the allocation on node %s: %w", g, node.Name, err)
		}
		if g.pod != nil {
			fmt.Fprintf(o.Err, "%s: allocated %s on node %s\n", g, plural(len(claims), "claim"), node.Name)
			if ext != nil {
				fmt.Fprintf(o.Err, "%s: extended resources in claim %s (status.extendedResourceClaimStatus): %s\n", g, ext.Name, mappingText(mappings))
			}
		} else {
			fmt.Fprintf(o.Err, "allocated %s on node %s\n", plural(len(claims), "claim"), node.Name)
		}
		return claims, nil
	}
	for _, e := range excluded {
		fmt.Fprintln(o.Err, e)
	}
	if len(unusable) > 0 {
		// As an invalid pool that the search met: an answer no node gives
		// because of the input, not a misfit.
		msgs := make([]string, len(unusable))
		for i, ne := range unusable {
			msgs[i] = fmt.Sprintf("node %s: %v", ne.Node, ne)
		}
		for _, u := range unfit {
			writeExplanation(o.Err, u.Explanation)
		}
		return nil, &exitError{code: ExitCannotAnswer, msg: "no node fits: " + strings.Join(msgs, "; ")}
	}
	if len(unfit) == 0 {
		return nil, &exitError{code: ExitNoFit, msg: fmt.Sprintf("%s may run on none of the %s tried", g, plural(len(nodes), "node"))}
	}
	if g.pod != nil {
		fmt.Fprintf(o.Err, "%s does not fit:\n", g)
	}
	return nil, reportUnfit(o, unfit)
}

// mappingText lists which request of the extended-resource claim serves
// which container's resource.
func mappingText(ms []corev1.ContainerExtendedResourceRequest) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("container %s %s -> request %s", m.ContainerName, m.ResourceName, m.RequestName)
	}
	return strings.Join(parts, ", ")
}

// reportUnfit explains every node tried. Upstream treats invalid pools as
// a per-node failure and surfaces them only when no node fits (KEP-4815
// "Validation"; kube-scheduler reports them in the pod status), so that is
// when they turn the outcome into an error.
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
		return &exitError{code: ExitCannotAnswer, msg: "no node fits and invalid resource pools were encountered: " + strings.Join(sortedCopy(msgs), "; ")}
	}
	return &exitError{code: ExitNoFit, msg: fmt.Sprintf("the claims do not fit on %s", plural(len(unfit), "node"))}
}

// placeSharing finds a node for a pod all of whose pending claims were
// allocated here for pods before it: the first node the pod may use on
// which those allocations are available.
func (o *allocateOptions) placeSharing(c *cluster, g *group, shared []*resourcev1.ResourceClaim, nodes []*corev1.Node) error {
	allocated := c.allocatedOf(g)
	var excluded []string
	for _, node := range nodes {
		if why := g.excluded(node, allocated); why != "" {
			excluded = append(excluded, fmt.Sprintf("node %s: %s", node.Name, why))
			continue
		}
		fmt.Fprintf(o.Err, "%s: shares %s allocated before, on node %s\n", g, plural(len(shared), "claim"), node.Name)
		return nil
	}
	for _, e := range excluded {
		fmt.Fprintln(o.Err, e)
	}
	return &exitError{code: ExitNoFit, msg: fmt.Sprintf("%s may run on none of the %s tried", g, plural(len(nodes), "node"))}
}

// reserve adds pod to the claim's reservedFor, once.
func reserve(claim *resourcev1.ResourceClaim, pod *corev1.Pod) {
	if pod == nil || slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
		return r.Resource == "pods" && r.Name == pod.Name
	}) {
		return
	}
	claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
}
