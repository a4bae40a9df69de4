package schedplugin

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/state"
)

// Reserve assumes the chosen node's allocations: in the State, and in the
// framework's claim tracker where the other DRA plugins see them.
func (pl *Plugin) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	logger := klog.FromContext(ctx)
	s, err := readState(cs)
	if err != nil {
		return asError(logger, err)
	}
	if len(s.claims) > 0 || s.ext != nil {
		// PreBind writes the claims; Unreserve ends the count if it never
		// gets there.
		pl.binder.gate.take(pod.UID)
	}
	pl.nodeResources.reserve(s, pod, nodeName)
	// Nil once the group's pods are reserved for binding: what is shared
	// from then on is counted in the claim tracker alone.
	group, err := groupStateOf(cs, false)
	if err != nil {
		return asError(logger, err)
	}
	if st := pl.reserveShared(logger, s, pod, group); st != nil {
		return st
	}
	if s.cycle == nil && s.ext == nil {
		return nil
	}
	// Placed: nodes the Cycle rejected on the way no longer matter.
	pl.waiting.drop(pod.UID)
	// The results stay until PreBind: in a pod group's cycle
	// kube-scheduler calls Reserve, Unreserve and Reserve again on one
	// cycle state, for the same node or another one that fit.
	s.mu.Lock()
	res, ok := s.results[nodeName]
	var v *variant
	if s.ext != nil {
		v = s.ext.nodes[nodeName]
	}
	s.mu.Unlock()
	if !ok {
		if s.ext != nil && len(s.pending) == 0 && v != nil && v.claim == nil {
			// The node's device plugins serve every extended resource:
			// nothing for DRA.
			return nil
		}
		return asError(logger, fmt.Errorf("no allocation for node %s", nodeName))
	}
	s.allocations = res
	s.inFlight = make([]bool, len(s.pending))
	s.written = make([]bool, len(s.pending))
	for j, i := range s.pending {
		c := s.claims[i].claim.DeepCopy()
		if !slices.Contains(c.Finalizers, resourcev1.Finalizer) {
			c.Finalizers = append(c.Finalizers, resourcev1.Finalizer)
		}
		c.Status.Allocation = res[j]
		if err := pl.feed.assume(c); err != nil {
			return asError(logger, fmt.Errorf("assume allocation of claim %s: %w", klog.KObj(c), err))
		}
		if err := pl.dra.ResourceClaims().SignalClaimPendingAllocation(c.UID, c); err != nil {
			pl.feed.forgetUnwritten(state.KeyOf(c))
			return asError(logger, fmt.Errorf("signal allocation of claim %s: %w", klog.KObj(c), err))
		}
		s.inFlight[j] = true
		group.share(c.UID, pod.UID)
		logger.V(5).Info("Reserved devices", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(c), "node", nodeName)
	}
	if len(res) > len(s.pending) {
		if v == nil || v.claim == nil {
			return asError(logger, fmt.Errorf("node %s: an allocation for an extended-resource claim the node does not need", nodeName))
		}
		if err := pl.reserveExtended(s, v, res[len(s.pending)]); err != nil {
			return asError(logger, err)
		}
		logger.V(5).Info("Reserved devices for extended resources", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(v.claim), "node", nodeName)
	}
	pl.countPending(pod, s, OutcomeReserved, len(res) > len(s.pending))
	return nil
}

// reserveShared counts the pod a sharer of the allocations it uses from
// another member of its pod group cycle, so that they stay in flight until
// written or until no member uses them. Should the allocation have left
// flight since PreFilter (the member that made it was unreserved), the pod
// puts it back: its node was chosen for that allocation.
func (pl *Plugin) reserveShared(logger klog.Logger, s *cycleState, pod *v1.Pod, group *groupState) *fwk.Status {
	for i, a := range s.shared {
		if a == nil || s.sharing[i] {
			continue
		}
		c := s.claims[i].claim.DeepCopy()
		if !slices.Contains(c.Finalizers, resourcev1.Finalizer) {
			c.Finalizers = append(c.Finalizers, resourcev1.Finalizer)
		}
		c.Status.Allocation = a
		if err := pl.feed.share(c); err != nil {
			return asError(logger, fmt.Errorf("assume shared allocation of claim %s: %w", klog.KObj(c), err))
		}
		if err := pl.dra.ResourceClaims().SignalClaimPendingAllocation(c.UID, c); err != nil {
			return asError(logger, fmt.Errorf("signal shared allocation of claim %s: %w", klog.KObj(c), err))
		}
		if s.sharing == nil {
			s.sharing = map[int]bool{}
		}
		s.sharing[i] = true
		group.share(c.UID, pod.UID)
		logger.V(5).Info("Sharing devices in flight", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(c))
	}
	return nil
}

// Unreserve undoes Reserve and the part of PreBind that succeeded: it
// drops allocations that were not written and takes the pod out of the
// claims' reservedFor. It is idempotent.
func (pl *Plugin) Unreserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ string) {
	logger := klog.FromContext(ctx)
	pl.binder.gate.release(pod.UID)
	s, err := readState(cs)
	if err != nil || len(s.claims) == 0 && s.ext == nil {
		return
	}
	pl.nodeResources.unreserve(ctx, logger, s, pod)
	group, _ := groupStateOf(cs, false)
	// An allocation in flight ends with its last sharer: other members of
	// the pod's group may still use it.
	land := func(i int) {
		c := s.claims[i].claim
		tr := pl.dra.ResourceClaims()
		if pl.feed.keepInFlight(state.KeyOf(c), c.UID) {
			// Maybe stored: the other DRA plugins must keep off its
			// devices until the claim shows it. The group's other
			// members no longer share it.
			group.landed(c.UID)
			return
		}
		if tr.MaybeRemoveClaimPendingAllocation(c.UID, false) {
			tr.AssumedClaimRestore(c.Namespace, c.Name)
			group.landed(c.UID)
		} else if tr.GetPendingAllocation(c.UID) != nil {
			return
		}
		pl.feed.forgetUnwritten(state.KeyOf(c))
	}
	for j, i := range s.pending {
		if j < len(s.inFlight) && s.inFlight[j] {
			land(i)
			s.inFlight[j] = false
			allocationOutcomes.WithLabelValues(pl.fh.ProfileName(), claimKind(pod, s.claims[i]), OutcomeUnreserved).Inc()
		}
	}
	for i := range s.sharing {
		land(i)
		delete(s.sharing, i)
	}
	pl.unreserveExtended(ctx, s)
	if s.preBound {
		// The binding failed after PreBind, and may have failed with an
		// unknown outcome (etcd timed out) while the API server stores it:
		// a pod bound to a node must find its claims reserved for it, or
		// the kubelet does not start it. The reservation stays; the next
		// attempt finds the claims reserved for the pod and allocated on
		// that node, and PostFilter deallocates a claim reserved for this
		// pod alone if no node fits it any more.
		return
	}
	for _, pc := range s.claims {
		c := pc.claim
		// A reservation for the pod's PodGroup stays: other pods of the
		// group may use the claim. PodGroupPostFilter takes it back when
		// none of them is scheduled.
		if pc.extended || c.Status.Allocation == nil || !resourceclaim.IsReservedForPod(pod, c, false) {
			continue
		}
		if err := pl.binder.unreserve(ctx, c, pod.UID); err != nil {
			// The next attempt for the pod gets here again.
			logger.Error(err, "Unreserve", "resourceclaim", klog.KObj(c))
		}
	}
}
