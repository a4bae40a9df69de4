package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/podclaims"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/ops/admit"
)

// cluster is the state allocate and explain work on: everything read with
// -f, checked by admission, fed to a state.State, with what is to be
// allocated set apart in groups.
type cluster struct {
	set      *decode.Set
	groups   []*group
	st       *state.State
	snap     *state.Snapshot
	strategy allocator.Strategy
	nodeList []*corev1.Node
	// derived: there were no Node objects; nodeList was made from the
	// node names of the slices.
	derived bool
}

// group is what is allocated together: the pending claims of one pod, or
// the pending claims no pod in the input uses.
type group struct {
	pod *corev1.Pod // nil for the claims no pod uses
	// claims are the pod's claims (allocated or not) or the unused ones.
	claims []*resourcev1.ResourceClaim
	// created marks the claims made here from templates, as the
	// resourceclaim controller would create them.
	created map[*resourcev1.ResourceClaim]bool
	// ext is what the pod asks of extended resources that DeviceClasses
	// back, whose claim kube-scheduler would make per node (nil: none,
	// or the claim is in the input and among claims).
	ext *podclaims.Extended
}

func (g *group) String() string {
	if g.pod == nil {
		return "claims"
	}
	return "pod " + g.pod.Namespace + "/" + g.pod.Name
}

// readCluster reads and admits the inputs. Unlike validate, an invalid
// input is not a finding here but a reason not to answer: the exit code is
// ExitCannotAnswer, and every problem is returned for the caller to print.
// undone says what the verb did not do then ("allocated", "described").
func (o *inputOptions) readCluster(strategy allocator.Strategy, undone string) (*cluster, []admit.Problem, error) {
	c, err := o.readClusterInput(strategy)
	var ce *inputErrors
	if errors.As(err, &ce) {
		return nil, ce.problems, &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("%s in the input; nothing was %s", plural(len(ce.problems), "error"), undone)}
	}
	return c, nil, err
}

// inputErrors carries the problems of an input allocate cannot use.
type inputErrors struct{ problems []admit.Problem }

func (e *inputErrors) Error() string { return "invalid input" }

// printProblems prints problems one per line, as validate does.
func printProblems(w io.Writer, problems []admit.Problem) {
	for _, p := range problems {
		fmt.Fprintln(w, p.Text)
	}
}

func (o *inputOptions) readClusterInput(strategy allocator.Strategy) (*cluster, error) {
	gates, err := parseFeatureGates(o.featureGates)
	if err != nil {
		return nil, err
	}
	target, err := o.targetVersion()
	if err != nil {
		return nil, err
	}
	in, err := o.read()
	if err != nil {
		return nil, err
	}
	var problems []admit.Problem
	for _, p := range admit.ReviewFor(target, in.objects, in.decodeErrors).Problems {
		if p.Severity == "error" && p.Pool == "" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, &inputErrors{problems}
	}
	c := &cluster{set: decode.Group(in.objects), strategy: strategy, st: state.New(state.Options{Features: gates, KubeVersion: ptr.Deref(o.allocateAs, validation.KubeVersion{})})}
	// The State taints the devices the rules select, as it does for the
	// scheduler plugin.
	for _, r := range c.set.TaintRules {
		if err := c.st.SetTaintRule(r); err != nil {
			return nil, &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("%s DeviceTaintRule/%s: %v", c.sourceOf(r), r.Name, err)}
		}
	}
	for _, s := range c.set.Slices {
		if err := c.st.SetMixinSlice(s); err != nil {
			return nil, &exitError{code: ExitCannotAnswer, msg: err.Error()}
		}
	}
	for _, dc := range c.set.Classes {
		if err := c.st.SetClass(dc); err != nil {
			return nil, &exitError{code: ExitCannotAnswer, msg: err.Error()}
		}
	}
	if err := c.groupClaims(); err != nil {
		return nil, err
	}
	for _, g := range c.groups {
		for _, claim := range g.claims {
			if err := c.st.SetClaim(claim); err != nil {
				return nil, &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("%s ResourceClaim/%s: %v", c.sourceOf(claim), claim.Name, err)}
			}
		}
	}
	c.snap = c.st.Snapshot()
	c.nodeList, c.derived = c.set.Nodes, false
	if len(c.nodeList) == 0 {
		c.nodeList, c.derived = nodesOfSlices(c.set.Slices), true
	}
	return c, nil
}

func (c *cluster) sourceOf(obj any) string {
	if src, ok := c.set.Source(obj); ok {
		return src.String()
	}
	return "(made from a template)"
}

// groupClaims finds every pod's claims, making the ones that come from
// templates, and puts the claims no pod uses in a group of their own,
// first. Claims already allocated are in use; the others are pending.
func (c *cluster) groupClaims() error {
	byKey := map[state.ClaimKey]*resourcev1.ResourceClaim{}
	for _, claim := range c.set.Claims {
		byKey[state.KeyOf(claim)] = claim
	}
	resolver := inputResolver(c.set, byKey)
	used := map[*resourcev1.ResourceClaim]bool{}
	var podGroups []*group
	for _, pod := range c.set.Pods {
		g := &group{pod: pod, created: map[*resourcev1.ResourceClaim]bool{}}
		entries, _ := resolver.Resolve(pod)
		for _, e := range entries {
			if e.Err != nil {
				src, _ := c.set.Source(pod)
				return &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("%s Pod/%s: %s: %v", src, pod.Name, e.Field, e.Err)}
			}
			if e.Extended != nil && e.Claim == nil {
				g.ext = e.Extended
				continue
			}
			if e.Generated {
				g.created[e.Claim] = true
				byKey[state.KeyOf(e.Claim)] = e.Claim
			}
			used[e.Claim] = true
			g.claims = append(g.claims, e.Claim)
		}
		podGroups = append(podGroups, g)
	}
	loose := &group{}
	for _, claim := range c.set.Claims {
		if !used[claim] {
			loose.claims = append(loose.claims, claim)
		}
	}
	for _, g := range append([]*group{loose}, podGroups...) {
		if len(g.claims) > 0 || g.ext != nil {
			c.groups = append(c.groups, g)
		}
	}
	return nil
}

// inputResolver resolves pods' claims against the input, standing in for
// the resourceclaim controller: claims (by key) are the input's and those
// made for pods before, which the caller adds as it goes. Extended
// resources are mapped by the input's DeviceClasses, as kube-scheduler
// maps them (DRAExtendedResource is GA and locked on in 1.37).
func inputResolver(set *decode.Set, claims map[state.ClaimKey]*resourcev1.ResourceClaim) podclaims.Resolver {
	return podclaims.Resolver{
		Classes: podclaims.ClassesOf(set.Classes),
		Claim: func(ns, name string) (*resourcev1.ResourceClaim, error) {
			return claims[state.ClaimKey{Namespace: ns, Name: name}], nil
		},
		Templates: &podclaims.Templates{
			Template: func(ns, name string) (*resourcev1.ResourceClaimTemplate, error) {
				for _, t := range set.ClaimTemplates {
					if t.Namespace == ns && t.Name == name {
						return t, nil
					}
				}
				return nil, nil
			},
			Owned: func(*corev1.Pod) []*resourcev1.ResourceClaim { return set.Claims },
		},
	}
}

// extendedOn is the extended-resource claim the group's pod needs on
// node, with the request mappings kube-scheduler would write into the
// pod's status; nil when the pod asks for no extended resource a class
// backs or the node's device plugins serve them all. why says why the pod
// cannot run on the node at all: an extended resource that neither the
// node advertises nor a class backs.
func (g *group) extendedOn(node *corev1.Node) (claim *resourcev1.ResourceClaim, mappings []corev1.ContainerExtendedResourceRequest, why string) {
	if g.ext == nil {
		return nil, nil, ""
	}
	return extendedOn(g.pod, g.ext, node)
}

func extendedOn(pod *corev1.Pod, ext *podclaims.Extended, node *corev1.Node) (claim *resourcev1.ResourceClaim, mappings []corev1.ContainerExtendedResourceRequest, why string) {
	need, err := ext.OnNode(podclaims.Allocatable(node))
	if err != nil {
		return nil, nil, err.Error()
	}
	claim, mappings = ext.Claim(need, podclaims.StableExtendedClaimName(pod))
	return claim, mappings, ""
}

// withExtended is pending and, if not nil, the extended-resource claim.
func withExtended(pending []*resourcev1.ResourceClaim, ext *resourcev1.ResourceClaim) []*resourcev1.ResourceClaim {
	if ext == nil {
		return pending
	}
	return append(slices.Clip(pending), ext)
}

// pending are a group's claims that have no allocation yet, neither in
// the input nor from a group allocated before (two pods may share a
// claim).
func (c *cluster) pending(g *group) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	seen := map[state.ClaimKey]bool{}
	for _, claim := range g.claims {
		key := state.KeyOf(claim)
		if cur, ok := c.snap.Claim(key); ok && cur.Status.Allocation == nil && !seen[key] {
			seen[key] = true
			out = append(out, cur)
		}
	}
	return out
}

// nodesOfSlices makes the nodes the slices name (spec.nodeName and per
// device nodeName), in order of first mention, for input without Node
// objects. They carry the one label every kubelet sets,
// kubernetes.io/hostname; node selectors that need other labels need the
// real Node objects.
func nodesOfSlices(slices []*api.ResourceSlice) []*corev1.Node {
	var out []*corev1.Node
	seen := map[string]bool{}
	add := func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		out = append(out, syntheticNode(name))
	}
	for _, s := range slices {
		add(ptr.Deref(s.Spec.NodeName, ""))
		for i := range s.Spec.Devices {
			add(ptr.Deref(s.Spec.Devices[i].NodeName, ""))
		}
	}
	return out
}

func syntheticNode(name string) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
	}
}

// labelSelectingSlices names the slices that choose nodes by labels, which
// nodes made from slice names do not have.
func labelSelectingSlices(slices []*api.ResourceSlice) []string {
	var out []string
	for _, s := range slices {
		if s.Spec.NodeSelector != nil {
			out = append(out, s.Name+" (spec.nodeSelector)")
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].NodeSelector != nil {
				out = append(out, fmt.Sprintf("%s (spec.devices[%d].nodeSelector)", s.Name, i))
				break
			}
		}
	}
	return out
}

// nodes returns the nodes to try: the one named, or every node in input
// order (the order a user wrote them is the order they expect). Without
// Node objects they are the nodes the slices name, which notes says.
func (c *cluster) nodes(name string, notes io.Writer) ([]*corev1.Node, error) {
	if c.derived {
		if name != "" {
			fmt.Fprintf(notes, "note: no Node objects in the input; node %s has only the label %s=%s\n", name, corev1.LabelHostname, name)
		} else if len(c.nodeList) > 0 {
			names := make([]string, len(c.nodeList))
			for i, n := range c.nodeList {
				names[i] = n.Name
			}
			fmt.Fprintf(notes, "note: no Node objects in the input; trying the nodes the ResourceSlices name (%s), each with only the label %s\n", strings.Join(names, ", "), corev1.LabelHostname)
		}
		if sel := labelSelectingSlices(c.set.Slices); len(sel) > 0 {
			fmt.Fprintf(notes, "note: ResourceSlice %s selects nodes by label: add the Node objects with -f for those devices to be found\n", strings.Join(sel, ", "))
		}
	}
	if name == "" && len(c.nodeList) == 0 {
		return nil, usageErrorf("no Node objects in the input, and no ResourceSlice names a node: add the nodes to -f or name one with --node")
	}
	if c.derived && name != "" && !slices.ContainsFunc(c.nodeList, func(n *corev1.Node) bool { return n.Name == name }) {
		return []*corev1.Node{syntheticNode(name)}, nil
	}
	return namedNode(c.nodeList, name, "in the input")
}

// namedNode is every node, or the one --node names among them, wherever
// they were read (where says).
func namedNode(nodes []*corev1.Node, name, where string) ([]*corev1.Node, error) {
	if name == "" {
		return nodes, nil
	}
	for _, n := range nodes {
		if n.Name == name {
			return []*corev1.Node{n}, nil
		}
	}
	return nil, usageErrorf("--node %s: no Node of that name %s", name, where)
}

// excluded says why a group's pod cannot run on node ("" if it can): its
// nodeName, nodeSelector or required node affinity, as the scheduler's
// NodeName and NodeAffinity filters decide, or one of its allocated claims
// whose devices the node cannot reach, as DRA's Filter decides.
func (g *group) excluded(node *corev1.Node, allocated []*resourcev1.ResourceClaim) string {
	if c := outsideAllocation(allocated, node); c != nil {
		return fmt.Sprintf("ResourceClaim %s/%s is allocated on other nodes (status.allocation.nodeSelector)", c.Namespace, c.Name)
	}
	if g.pod == nil {
		return ""
	}
	if g.pod.Spec.NodeName != "" && g.pod.Spec.NodeName != node.Name {
		return "the pod is bound to node " + g.pod.Spec.NodeName
	}
	match, err := nodeaffinity.GetRequiredNodeAffinity(g.pod).Match(node)
	if err != nil {
		return "the pod's node affinity cannot be evaluated: " + err.Error()
	}
	if !match {
		return "the node does not match the pod's nodeSelector or required node affinity"
	}
	return ""
}

// allocatedOf are a pod's claims that are allocated now: in the input, or
// for a pod before it. The claims no pod uses are no pod's: none of them
// constrains where the others go.
func (c *cluster) allocatedOf(g *group) []*resourcev1.ResourceClaim {
	if g.pod == nil {
		return nil
	}
	var out []*resourcev1.ResourceClaim
	for _, claim := range g.claims {
		if cur, ok := c.snap.Claim(state.KeyOf(claim)); ok && cur.Status.Allocation != nil {
			out = append(out, cur)
		}
	}
	return out
}

// madeFor are the claims of a pod's group that were allocated here for a
// pod before it, as printed.
func (c *cluster) madeFor(g *group, made map[state.ClaimKey]*resourcev1.ResourceClaim) []*resourcev1.ResourceClaim {
	if g.pod == nil {
		return nil
	}
	var out []*resourcev1.ResourceClaim
	for _, claim := range g.claims {
		if m := made[state.KeyOf(claim)]; m != nil && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// allocate allocates claims together on node.
func (c *cluster) allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) ([]*resourcev1.AllocationResult, error) {
	return c.snap.Cycle(claims, state.CycleOptions{Strategy: c.strategy}).Allocate(ctx, node)
}

// assume records a group's allocation, so that the groups after it see
// its devices in use.
func (c *cluster) assume(claims []*resourcev1.ResourceClaim) error {
	for _, claim := range claims {
		if err := c.st.Assume(claim); err != nil {
			return err
		}
	}
	c.snap = c.st.Snapshot()
	return nil
}

// allocated returns the claims with their new allocation; a pod's claims
// are also reserved for the pod, as the scheduler does when it binds.
func (g *group) allocated(pending []*resourcev1.ResourceClaim, results []*resourcev1.AllocationResult) []*resourcev1.ResourceClaim {
	out := make([]*resourcev1.ResourceClaim, len(pending))
	for i, claim := range pending {
		claim = claim.DeepCopy()
		claim.Status.Allocation = results[i]
		if g.pod != nil && !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
			return r.Name == g.pod.Name && r.Resource == "pods"
		}) {
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: g.pod.Name, UID: g.pod.UID})
		}
		out[i] = claim
	}
	return out
}

// fatal turns an allocator error that no node can work around into
// ExitCannotAnswer.
func fatal(err error) error {
	var fe *allocator.FatalError
	if errors.As(err, &fe) {
		return &exitError{code: ExitCannotAnswer, msg: fe.Error()}
	}
	return &exitError{code: ExitCannotAnswer, msg: err.Error()}
}

func parseStrategy(s string) (allocator.Strategy, error) {
	switch s {
	case "first-fit":
		return allocator.FirstFit, nil
	case "best-fit":
		return allocator.BestFit, nil
	}
	return 0, usageErrorf("--strategy: expected first-fit or best-fit, found %q", s)
}
