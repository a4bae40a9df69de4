package schedplugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/state"
)

// PreFilter checks the pod's claims and prepares the allocation of those
// still pending.
func (pl *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	s := &cycleState{}
	cs.Write(stateKey, s)
	if pl.claims.maySkip(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	group, err := groupStateOf(cs, false)
	if err != nil {
		return nil, asError(logger, err)
	}
	if group == nil {
		// The pods in flight that later members of a pod group cycle
		// would wait for are the earlier members, which are bound only
		// once the cycle is over: the gate holds back the first member.
		pl.binder.gate.wait(ctx)
		if group, err = groupStateOf(cs, true); err != nil {
			return nil, asError(logger, err)
		}
	}
	if group != nil {
		group.members[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = s
	}
	// A new attempt: whatever turned the pod away before is looked at
	// again.
	pl.waiting.drop(pod.UID)
	claims, ext, err := pl.claims.podClaims(pod)
	if err != nil {
		return nil, unresolvable(logger, err.Error())
	}
	if len(claims) == 0 && ext == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if err := pl.consumers(pod, claims); err != nil {
		return nil, unresolvable(logger, err.Error())
	}
	s.claims = claims
	s.availableOn = make([]*nodeaffinity.NodeSelector, len(claims))
	s.shared = make([]*resourcev1.AllocationResult, len(claims))
	for i, pc := range claims {
		c := pc.claim
		if pc.extended {
			// Made by an earlier attempt whose binding failed: its
			// allocation may not hold any more, and finding out would
			// take the allocator's work. Every node rejects the pod and
			// PostFilter deletes the claim, as in-tree.
			s.stale = c
			return nil, nil
		}
		a := c.Status.Allocation
		if a != nil && !resourceclaim.CanBeReserved(c) && !pl.fts.reservedFor(pod, c) {
			return nil, unresolvable(logger, reasonInUse)
		}
		if a == nil {
			// Allocated by an earlier member of this pod group cycle and
			// not written yet: used as if it were.
			a = group.sharedAllocation(pl.dra.ResourceClaims(), c)
			s.shared[i] = a
		}
		if a != nil {
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
			return nil, unresolvable(logger, fmt.Sprintf(reasonBeingAllocated, klog.KObj(c)))
		}
		if st := pl.checkClasses(logger, c); st != nil {
			return nil, st
		}
		s.pending = append(s.pending, i)
	}
	if len(s.pending) == 0 && ext == nil {
		if pl.fts.NodeAllocatableResources {
			// Filter looks up the allocated devices' node resources.
			if err := pl.waitForSync(ctx); err != nil {
				return nil, asError(logger, err)
			}
			s.snap = pl.st.Snapshot()
		}
		return nil, nil
	}
	if err := pl.waitForSync(ctx); err != nil {
		return nil, asError(logger, err)
	}
	s.toAllocate = make([]*resourcev1.ResourceClaim, len(s.pending))
	for j, i := range s.pending {
		s.toAllocate[j] = claims[i].claim
		pl.feed.observe(claims[i].claim)
	}
	pl.feed.sync(pl.dra.ResourceClaims())
	// The mark before the snapshot: a change that makes room after it
	// may be missing from the snapshot, and wakes the pod if it is
	// turned away.
	s.mark = pl.waiting.current()
	s.snap = pl.st.Snapshot()
	s.opts = state.CycleOptions{Strategy: pl.cfg.strategy}
	if pl.fts.FilterTimeout {
		// Per node, and only when the node searches: a node that
		// remembers its answer needs no timer.
		s.opts.Timeout = pl.cfg.filterTimeout
	}
	if len(s.toAllocate) > 0 {
		s.cycle = s.snap.Cycle(s.toAllocate, s.opts)
	}
	if ext != nil {
		// The claim's requests depend on the node (which extended
		// resources its device plugins advertise): Filter makes a cycle
		// per kind of node.
		s.ext = newExtendedState(ext, pod)
	}
	s.results = pl.results.get(len(nodes))
	pl.countPending(pod, s, "", s.ext != nil)
	return nil, nil
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
			return unresolvable(logger, fmt.Sprintf(reasonNoClass, request, class))
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
			return unresolvable(logger, fmt.Sprintf(reasonUnknownRequest, klog.KObj(c), r.Name))
		}
	}
	return nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin: other pods on a
// node do not change what its devices can do.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
