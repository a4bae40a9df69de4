package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/live"
	"github.com/dractl/dractl/pkg/state"
)

// resolvedClaim is one entry of a pod's spec.resourceClaims and the claim it
// stands for.
type resolvedClaim struct {
	entry string // spec.resourceClaims[].name
	// template names the ResourceClaimTemplate the claim is made from.
	template string
	// claim is the ResourceClaim: as stored, or, for a template whose
	// claim the resourceclaim controller has not created yet, what it will
	// create. nil when a named claim does not exist (missing).
	claim *resourcev1.ResourceClaim
	// generated: claim is built from the template here, not read.
	generated bool
	// missing is the name of a named claim that does not exist.
	missing string
}

// podSource is what explain pod/NAME reads, from a cluster or from files
// (a `dractl snapshot` directory).
type podSource struct {
	snap      *state.Snapshot
	templates func(namespace, name string) (*resourcev1.ResourceClaimTemplate, error)
	nodes     []*corev1.Node
}

// resolveClaims finds the claims of a pod as kube-scheduler does: a named
// claim by name, a template's claim by the name the resourceclaim
// controller recorded in the pod's status.
func (src *podSource) resolveClaims(pod *corev1.Pod) ([]resolvedClaim, error) {
	var out []resolvedClaim
	for _, rc := range pod.Spec.ResourceClaims {
		pc := resolvedClaim{entry: rc.Name}
		name := ""
		switch {
		case rc.ResourceClaimName != nil:
			name = *rc.ResourceClaimName
		case rc.ResourceClaimTemplateName != nil:
			pc.template = *rc.ResourceClaimTemplateName
			for _, s := range pod.Status.ResourceClaimStatuses {
				if s.Name == rc.Name && s.ResourceClaimName != nil {
					name = *s.ResourceClaimName
				}
			}
		}
		if name != "" {
			pc.claim, _ = src.snap.Claim(state.ClaimKey{Namespace: pod.Namespace, Name: name})
		}
		switch {
		case pc.claim == nil && pc.template != "":
			t, err := src.templates(pod.Namespace, pc.template)
			if err != nil {
				return nil, err
			}
			pc.claim = &resourcev1.ResourceClaim{Spec: t.Spec.Spec}
			pc.claim.Namespace, pc.claim.Name = pod.Namespace, pod.Name+"-"+rc.Name
			pc.generated = true
		case pc.claim == nil:
			pc.missing = name
		}
		out = append(out, pc)
	}
	return out, nil
}

// explainPod prints the pod's claims and then either the devices they hold
// (allocated) or, per node, why the pending ones do or do not fit.
func explainPod(ctx context.Context, w io.Writer, src *podSource, pod *corev1.Pod, only string) error {
	claims, err := src.resolveClaims(pod)
	if err != nil {
		return err
	}
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
	missing := 0
	for _, pc := range claims {
		switch {
		case pc.claim == nil:
			fmt.Fprintf(w, "  %s: ResourceClaim %s/%s does not exist; the pod cannot be scheduled until it does\n", pc.entry, pod.Namespace, pc.missing)
			missing++
		case pc.claim.Status.Allocation != nil:
			fmt.Fprintf(w, "  %s: ResourceClaim %s/%s%s: allocated\n", pc.entry, pc.claim.Namespace, pc.claim.Name, fromTemplate(pc))
			for _, r := range pc.claim.Status.Allocation.Devices.Results {
				fmt.Fprintf(w, "    request %s: %s/%s/%s\n", r.Request, r.Driver, r.Pool, r.Device)
			}
			allocated = append(allocated, pc.claim)
		default:
			state := "pending"
			if pc.generated {
				state = "pending, not created yet by the resourceclaim controller"
			}
			fmt.Fprintf(w, "  %s: ResourceClaim %s/%s%s: %s\n", pc.entry, pc.claim.Namespace, pc.claim.Name, fromTemplate(pc), state)
			pending = append(pending, pc.claim)
		}
	}
	if len(pending) == 0 || missing > 0 || pod.Spec.NodeName != "" {
		return nil
	}
	nodes := src.nodes
	if only != "" {
		i := slices.IndexFunc(nodes, func(n *corev1.Node) bool { return n.Name == only })
		if i < 0 {
			return usageErrorf("--node %s: no such Node", only)
		}
		nodes = nodes[i : i+1]
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
		results, err := cycle.Allocate(ctx, node)
		switch {
		case allocator.IsUnfit(err):
			writeExplanation(w, err.(*allocator.UnfitError).Explanation)
		case err != nil:
			return fatal(err)
		default:
			writeFit(w, node.Name, pending, results)
		}
	}
	return nil
}

func fromTemplate(pc resolvedClaim) string {
	if pc.template == "" {
		return ""
	}
	return " (from ResourceClaimTemplate " + pc.template + ")"
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
	c, problems, err := o.readCluster(allocator.FirstFit)
	if err != nil {
		printProblems(o.Err, problems)
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
