package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/podclaims"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/live"
)

// podSource is what explain pod/NAME reads, from a cluster or from files
// (a `dractl snapshot` directory).
type podSource struct {
	snap *state.Snapshot
	// claims resolves the pod's claims, making those the resourceclaim
	// controller has not created yet as allocate does.
	claims podclaims.Resolver
	// nodes are the nodes to try, --node's alone if it names one; asked
	// only for a pod with pending claims.
	nodes func() ([]*corev1.Node, error)
}

// explainPod prints the pod's claims and then either the devices they hold
// (allocated) or, per node, why the pending ones do or do not fit.
func explainPod(ctx context.Context, w io.Writer, src *podSource, pod *corev1.Pod) error {
	claims, _ := src.claims.Resolve(pod)
	where := "pending"
	if pod.Spec.NodeName != "" {
		where = "scheduled on node " + pod.Spec.NodeName
	}
	fmt.Fprintf(w, "pod %s/%s: %s, %s\n", pod.Namespace, pod.Name, where, plural(len(claims), "resource claim"))
	if len(claims) == 0 {
		fmt.Fprintln(w, "  the pod has no resource claims: DRA does not constrain where it runs")
		return nil
	}
	var pending, allocated []*resourcev1.ResourceClaim
	var ext *podclaims.Extended
	missing := 0
	for _, pc := range claims {
		switch {
		case pc.Extended != nil && pc.Claim == nil:
			fmt.Fprintf(w, "  %s: %s; kube-scheduler makes their claim for the node it picks, unless that node's device plugins serve them\n", pc.Name, strings.Join(pc.Extended.Resources(^podclaims.Need(0)), ", "))
			ext = pc.Extended
		case pc.Err != nil:
			fmt.Fprintf(w, "  %s: %s: %v; the pod cannot be scheduled until this changes\n", pc.Name, pc.Field, pc.Err)
			missing++
		case pc.Claim.Status.Allocation != nil:
			fmt.Fprintf(w, "  %s: ResourceClaim %s/%s%s: allocated\n", pc.Name, pc.Claim.Namespace, pc.Claim.Name, fromTemplate(pc))
			for _, r := range pc.Claim.Status.Allocation.Devices.Results {
				fmt.Fprintf(w, "    request %s: %s/%s/%s\n", r.Request, r.Driver, r.Pool, r.Device)
			}
			allocated = append(allocated, pc.Claim)
		default:
			state := "pending"
			if pc.Generated {
				state = "pending, not created yet by the resourceclaim controller"
			}
			fmt.Fprintf(w, "  %s: ResourceClaim %s/%s%s: %s\n", pc.Name, pc.Claim.Namespace, pc.Claim.Name, fromTemplate(pc), state)
			pending = append(pending, pc.Claim)
		}
	}
	if len(pending) == 0 && ext == nil || missing > 0 || pod.Spec.NodeName != "" {
		return nil
	}
	nodes, err := src.nodes()
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		fmt.Fprintln(w, "no nodes: the pending claims can be allocated nowhere")
		return nil
	}
	cycle := src.snap.Cycle(pending, state.CycleOptions{})
	for _, node := range nodes {
		if c := outsideAllocation(allocated, node); c != nil {
			fmt.Fprintf(w, "node %s: does not fit\n  ResourceClaim %s/%s is allocated on other nodes (status.allocation.nodeSelector)\n", node.Name, c.Namespace, c.Name)
			continue
		}
		claims, cycle := pending, cycle
		if ext != nil {
			// The extended-resource claim depends on the node.
			claim, _, why := extendedOn(pod, ext, node)
			if why != "" {
				fmt.Fprintf(w, "node %s: does not fit\n  %s\n", node.Name, why)
				continue
			}
			if claims = withExtended(pending, claim); len(claims) == 0 {
				fmt.Fprintf(w, "node %s: fits: the node's device plugins serve the pod's extended resources\n", node.Name)
				continue
			}
			if claim != nil {
				cycle = src.snap.Cycle(claims, state.CycleOptions{})
			}
		}
		results, err := cycle.Allocate(ctx, node)
		switch {
		case allocator.IsUnfit(err):
			writeExplanation(w, err.(*allocator.UnfitError).Explanation)
		case err != nil:
			return fatal(err)
		default:
			writeFit(w, node.Name, claims, results)
		}
	}
	return nil
}

func fromTemplate(pc podclaims.Entry) string {
	if pc.Template == "" {
		return ""
	}
	return " (from ResourceClaimTemplate " + pc.Template + ")"
}

// writeFit prints the devices claims would get on a node.
func writeFit(w io.Writer, node string, claims []*resourcev1.ResourceClaim, results []*resourcev1.AllocationResult) {
	fmt.Fprintf(w, "node %s: fits\n", node)
	for i, r := range results {
		for _, d := range r.Devices.Results {
			fmt.Fprintf(w, "  %s/%s request %s: %s/%s/%s\n", claims[i].Namespace, claims[i].Name, d.Request, d.Driver, d.Pool, d.Device)
		}
	}
}

// outsideAllocation returns an allocated claim whose node selector the
// node does not match: the pod must run where its allocated claims are.
func outsideAllocation(allocated []*resourcev1.ResourceClaim, node *corev1.Node) *resourcev1.ResourceClaim {
	for _, c := range allocated {
		sel := c.Status.Allocation.NodeSelector
		if sel == nil {
			continue
		}
		ns, err := nodeaffinity.NewNodeSelector(sel)
		if err != nil || !ns.Match(node) {
			return c
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
	if o.claim != "" || o.output != "" {
		return usageErrorf("--claim and --output: not with pod/NAME")
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
	kinds := live.KindSlices | live.KindClasses | live.KindClaims | live.KindTaintRules
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
	snap := st.Snapshot()
	nodes := func() ([]*corev1.Node, error) { return namedNode(objs.Nodes, o.node, "in the cluster") }
	src := &podSource{snap: snap, nodes: nodes, claims: podclaims.Resolver{
		Classes: podclaims.ClassesOf(objs.Classes),
		Claim: func(ns, name string) (*resourcev1.ResourceClaim, error) {
			claim, _ := snap.Claim(state.ClaimKey{Namespace: ns, Name: name})
			return claim, nil
		},
		Templates: &podclaims.Templates{
			Template: func(ns, name string) (*resourcev1.ResourceClaimTemplate, error) {
				t, err := c.ClaimTemplate(ctx, ns, name)
				if err != nil && !apierrors.IsNotFound(err) {
					return nil, clusterError(err)
				}
				return t, err
			},
			Owned: func(*corev1.Pod) []*resourcev1.ResourceClaim { return objs.Claims },
		},
	}}
	return explainPod(ctx, o.Out, src, pod)
}

// podFromFiles explains a pod read with -f, such as a snapshot's.
func (o *explainOptions) podFromFiles(ctx context.Context, ns, name string) error {
	c, problems, err := o.readCluster(allocator.FirstFit, "explained")
	if err != nil {
		printProblems(o.Err, problems)
		return err
	}
	i := slices.IndexFunc(c.set.Pods, func(p *corev1.Pod) bool { return p.Namespace == ns && p.Name == name })
	if i < 0 {
		return usageErrorf("pod %s/%s: no such Pod in the input", ns, name)
	}
	// The input's own claims, not the State's: a claim made here from a
	// template is then reported as not created yet, under the name
	// allocate gives it.
	byKey := map[state.ClaimKey]*resourcev1.ResourceClaim{}
	for _, claim := range c.set.Claims {
		byKey[state.KeyOf(claim)] = claim
	}
	// The nodes as allocate finds them: without Node objects, those the
	// slices name.
	nodes := func() ([]*corev1.Node, error) { return c.nodes(o.node, o.Err) }
	src := &podSource{snap: c.snap, nodes: nodes, claims: inputResolver(c.set, byKey)}
	return explainPod(ctx, o.Out, src, c.set.Pods[i])
}
