package schedplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/features"
	"github.com/dractl/dractl/pkg/state"
)

const stateKey fwk.StateKey = Name

// cycleState is what one pod's scheduling cycle knows, from PreFilter to
// PreBind. Filter writes it from many goroutines, under mu.
type cycleState struct {
	claims []podClaim
	// availableOn is the node selector of each allocated claim's
	// allocation (nil: every node, or not allocated).
	availableOn []*nodeaffinity.NodeSelector
	// pending are the indices (into claims) of the claims to allocate, in
	// the order the Cycle allocates them.
	pending []int
	snap    *state.Snapshot
	cycle   *state.Cycle
	// mark is the waitlist's mark, read before snap was taken.
	mark uint64

	mu sync.Mutex
	// results are the allocations per node, one per pending claim.
	results map[string][]*resourcev1.AllocationResult
	// unavailable are the allocated claims (indices) that some node could
	// not use; PostFilter may deallocate one of them.
	unavailable map[int]bool
	// rejected are the verdicts of the nodes dractl rejected, and invalid
	// the invalid pools those nodes saw.
	rejected map[string][]verdict
	invalid  []string
	// waiting: the pod is on the waitlist for a node the Cycle rejected.
	waiting bool

	// Set by Reserve: the chosen node's allocations, one per pending
	// claim, and which of them PreBind wrote.
	allocations []*resourcev1.AllocationResult
	reserved    []bool
	written     []bool
	// preBound: PreBind wrote every claim and returned success, so the
	// pod's binding may have been sent (see Unreserve).
	preBound bool
}

// Clone shares the state: the framework clones cycle state for
// preemption, and nothing here changes per clone.
func (s *cycleState) Clone() fwk.StateData { return s }

func readState(cs fwk.CycleState) (*cycleState, error) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, err
	}
	s, ok := d.(*cycleState)
	if !ok {
		return nil, fmt.Errorf("%s: cycle state has type %T", Name, d)
	}
	return s, nil
}

// PreFilter checks the pod's claims and prepares the allocation of those
// still pending.
func (pl *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	s := &cycleState{}
	cs.Write(stateKey, s)
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.gate.wait(ctx)
	// A new attempt: whatever turned the pod away before is looked at
	// again.
	pl.waiting.drop(pod.UID)
	claims, err := pl.podClaims(pod)
	if err != nil {
		return nil, unresolvable(logger, err.Error())
	}
	if len(claims) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s.claims = claims
	s.availableOn = make([]*nodeaffinity.NodeSelector, len(claims))
	for i, pc := range claims {
		c := pc.claim
		if a := c.Status.Allocation; a != nil {
			if !resourceclaim.CanBeReserved(c) && !resourceclaim.IsReservedForPod(pod, c, false) {
				return nil, unresolvable(logger, fmt.Sprintf("resourceclaim %s is in use by other pods", c.Name))
			}
			if a.NodeSelector != nil {
				ns, err := nodeaffinity.NewNodeSelector(a.NodeSelector)
				if err != nil {
					return nil, asError(logger, fmt.Errorf("resourceclaim %s: allocation's node selector: %w", c.Name, err))
				}
				s.availableOn[i] = ns
			}
			continue
		}
		if pl.feed.writeUnknown(state.KeyOf(c)) {
			// Allocating it again could give it other devices while the
			// earlier write still lands: an error sends the pod to
			// backoff, to be tried again once the claim shows the outcome.
			return nil, asError(logger, fmt.Errorf("resourceclaim %s: the API server did not say whether it stored the claim's allocation; waiting for the claim to show it", klog.KObj(c)))
		}
		if pl.dra.ResourceClaims().GetPendingAllocation(c.UID) != nil {
			return nil, unresolvable(logger, fmt.Sprintf("resource claim %s is in the process of being allocated", klog.KObj(c)))
		}
		if st := pl.checkClasses(logger, c); st != nil {
			return nil, st
		}
		s.pending = append(s.pending, i)
	}
	if len(s.pending) == 0 {
		return nil, nil
	}
	if err := pl.waitForSync(ctx); err != nil {
		return nil, asError(logger, err)
	}
	toAllocate := make([]*resourcev1.ResourceClaim, len(s.pending))
	for j, i := range s.pending {
		toAllocate[j] = claims[i].claim
		pl.feed.observe(claims[i].claim)
	}
	pl.feed.sync(pl.dra.ResourceClaims())
	// The mark before the snapshot: a change that makes room after it
	// may be missing from the snapshot, and wakes the pod if it is
	// turned away.
	s.mark = pl.waiting.current()
	s.snap = pl.st.Snapshot()
	opts := state.CycleOptions{Strategy: pl.cfg.strategy}
	if pl.fts.FilterTimeout {
		// Per node, and only when the node searches: a node that
		// remembers its answer needs no timer.
		opts.Timeout = pl.cfg.filterTimeout
	}
	s.cycle = s.snap.Cycle(toAllocate, opts)
	s.results = pl.resultsMap(len(nodes))
	return nil, nil
}

// resultsMap returns an empty map for a cycle's results on up to nodes
// nodes: one a finished cycle released, or a new one sized for every node
// Filter may be asked about, since growing it node by node cost more than
// the rest of a remembered node's Filter. Released maps are reused
// because a map for hundreds of nodes is a large allocation, whose fresh
// memory cost more to fault in than a used one costs to clear.
func (pl *Plugin) resultsMap(nodes int) map[string][]*resourcev1.AllocationResult {
	if m, ok := pl.resultMaps.Get().(map[string][]*resourcev1.AllocationResult); ok {
		return m
	}
	return make(map[string][]*resourcev1.AllocationResult, nodes)
}

// releaseResults hands the cycle's results map back for reuse once
// nothing reads it any more: after Reserve took the chosen node's.
func (pl *Plugin) releaseResults(s *cycleState) {
	s.mu.Lock()
	m := s.results
	s.results = nil
	s.mu.Unlock()
	if m != nil {
		clear(m)
		pl.resultMaps.Put(m)
	}
}

// checkClasses: every class a pending claim names must exist; a missing
// class makes the pod wait for a DeviceClass event.
func (pl *Plugin) checkClasses(logger klog.Logger, c *resourcev1.ResourceClaim) *fwk.Status {
	check := func(request, class string) *fwk.Status {
		if class == "" {
			return asError(logger, fmt.Errorf("resource claim %s, request %s: unsupported request type", klog.KObj(c), request))
		}
		_, err := pl.dra.DeviceClasses().Get(class)
		switch {
		case apierrors.IsNotFound(err):
			return unresolvable(logger, fmt.Sprintf("request %s: device class %s does not exist", request, class))
		case err != nil:
			return asError(logger, err)
		}
		return nil
	}
	for _, r := range c.Spec.Devices.Requests {
		switch {
		case r.Exactly != nil:
			if st := check(r.Name, r.Exactly.DeviceClassName); st != nil {
				return st
			}
		case len(r.FirstAvailable) > 0:
			if !pl.fts.PrioritizedList {
				return unresolvable(logger, fmt.Sprintf("resource claim %s, request %s: %s", klog.KObj(c), r.Name, features.RefusalSubrequests))
			}
			for _, sub := range r.FirstAvailable {
				if st := check(r.Name+"/"+sub.Name, sub.DeviceClassName); st != nil {
					return st
				}
			}
		default:
			return unresolvable(logger, fmt.Sprintf("resource claim %s, request %s: unknown request type", klog.KObj(c), r.Name))
		}
	}
	return nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin: other pods on a
// node do not change what its devices can do.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter checks that the node can use the pod's allocated claims and
// allocates its pending ones there.
func (pl *Plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	logger := klog.FromContext(ctx)
	s, err := readState(cs)
	if err != nil {
		return asError(logger, err)
	}
	if len(s.claims) == 0 {
		return nil
	}
	node := nodeInfo.Node()
	var unavailable []int
	var rejected []verdict
	for i, pc := range s.claims {
		a := pc.claim.Status.Allocation
		if a == nil {
			continue
		}
		why := ""
		switch {
		case s.availableOn[i] != nil && !s.availableOn[i].Match(node):
			why = whyElsewhere
		case skipsNodeOperations(a) && !slices.Contains(node.Status.DeclaredFeatures, features.NodeFeatureOptionalNodeOperations):
			why = whyNodeOps
		case pl.fts.BindingConditions:
			ready, err := readyForBinding(pc.claim)
			switch {
			case err != nil:
				why = whyBindingFailed
			case !ready && pl.bindingTimedOut(pc.claim):
				why = whyBindingTimout
			}
		}
		if why != "" {
			unavailable = append(unavailable, i)
			rejected = append(rejected, verdict{claim: pc.name, why: why})
		}
	}
	if len(unavailable) > 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.unavailable == nil {
			s.unavailable = map[int]bool{}
		}
		for _, i := range unavailable {
			s.unavailable[i] = true
		}
		s.reject(node.Name, rejected, nil)
		return unresolvable(logger, verdictStrings(rejected)...)
	}
	if s.cycle == nil {
		return nil
	}
	res, err := s.cycle.Allocate(ctx, node)
	var unfit *allocator.UnfitError
	switch {
	case errors.As(err, &unfit):
		vs := verdicts(unfit.Explanation, s.claimNames())
		var invalid []string
		for _, ip := range unfit.Explanation.InvalidPools {
			invalid = append(invalid, ip.Error())
		}
		s.mu.Lock()
		s.reject(node.Name, vs, invalid)
		wait := !s.waiting
		s.waiting = true
		s.mu.Unlock()
		if wait {
			pl.waiting.turnedAway(pod, s.mark)
		}
		return unresolvable(logger, verdictStrings(vs)...)
	case ctx.Err() != nil:
		return unresolvable(logger, fmt.Sprintf("asked by caller to stop allocating devices: %v", context.Cause(ctx)))
	case errors.Is(err, context.DeadlineExceeded):
		// Possibly transient: an error retries after a backoff rather
		// than waiting for a cluster event.
		return asError(logger, fmt.Errorf("node %s: timed out trying to allocate devices", node.Name))
	case err != nil:
		// A broken claim, class or pool: no node can do better.
		return asError(logger, err)
	case len(res) != len(s.pending):
		return asError(logger, fmt.Errorf("node %s: %d allocation results for %d claims", node.Name, len(res), len(s.pending)))
	}
	s.mu.Lock()
	if s.results != nil { // nil only once Reserve has released it
		s.results[node.Name] = res
	}
	s.mu.Unlock()
	return nil
}

// reject records a node's verdicts; the caller holds s.mu.
func (s *cycleState) reject(node string, vs []verdict, invalid []string) {
	if s.rejected == nil {
		s.rejected = map[string][]verdict{}
	}
	s.rejected[node] = vs
	s.invalid = append(s.invalid, invalid...)
}

// claimNames maps the allocator's names of the pending claims to the
// pod's names for them.
func (s *cycleState) claimNames() map[string]string {
	m := make(map[string]string, len(s.pending))
	for _, i := range s.pending {
		c := s.claims[i].claim
		m[c.Namespace+"/"+c.Name] = s.claims[i].name
	}
	return m
}

func verdictStrings(vs []verdict) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}

func skipsNodeOperations(a *resourcev1.AllocationResult) bool {
	for _, r := range a.Devices.Results {
		if len(r.SkipNodeOperations) > 0 {
			return true
		}
	}
	return false
}

// unresolvable marks the pod unschedulable until an event that
// EventsToRegister lists, as the in-tree plugin does for every rejection.
func unresolvable(logger klog.Logger, reasons ...string) *fwk.Status {
	if v := logger.V(5); v.Enabled() {
		v.Info("Pod unschedulable", "reason", strings.Join(reasons, "; "))
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons...)
}

func asError(logger klog.Logger, err error) *fwk.Status {
	logger.V(5).Info("Plugin failed", "err", err)
	return fwk.AsStatus(err)
}
