package schedplugin

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Pod groups (KEP-5729, kube-scheduler's GenericWorkload and
// DRAWorkloadResourceClaims). kube-scheduler schedules the pods of a
// PodGroup in one pod-group cycle: every member runs PreFilter to Reserve
// in turn, each on its own cycle state, beside a cycle state of the group
// they all see. Then the members are unreserved, last first, and each one
// that fits is reserved again on its own cycle state, with the group's
// state gone, and sent to binding. If no placement is found for the group,
// PodGroupPostFilter runs instead of each member's PostFilter.
//
// A claim the members share (the PodGroup's, in spec.resourceClaims of
// both) is allocated once in the group cycle: the first member that needs
// it allocates it in Filter and puts the allocation in flight in Reserve;
// later members of the same group cycle use that allocation as if it were
// written (groupState.inFlight), and add themselves to its sharers in the
// framework's claim tracker. The allocation leaves flight when one member's
// PreBind has written it, or when the last sharer is unreserved. Pods of
// other cycles still wait for an allocation in flight, as in-tree.
//
// A claim of the PodGroup is reserved for the PodGroup, not for each pod
// (resourceclaim.BindTo): status.reservedFor holds at most 256 consumers,
// and a group may have many more pods.

// groupState is what the plugin keeps in a pod-group cycle's state: the
// allocations in flight that the group's members share, and each member's
// cycle state for PodGroupPostFilter. The framework runs the members of a
// group one at a time and drops the state before binding starts, so it
// needs no lock.
type groupState struct {
	// inFlight are the claims whose allocation a member of this group
	// cycle put in flight in Reserve, with the members sharing it.
	inFlight map[types.UID]map[types.UID]bool
	// members are the cycle states of the members that ran PreFilter, for
	// PodGroupPostFilter.
	members map[types.NamespacedName]*cycleState
}

// Clone shares the state, as the framework's other pod-group plugins do.
func (g *groupState) Clone() fwk.StateData { return g }

// groupStateOf returns the plugin's state of the pod's group cycle, nil
// outside of one; create makes it on first use.
func groupStateOf(cs fwk.CycleState, create bool) (*groupState, error) {
	gcs := podGroupCycle(cs)
	if gcs == nil {
		return nil, nil
	}
	d, err := gcs.Read(stateKey)
	switch {
	case errors.Is(err, fwk.ErrNotFound) && create:
		g := &groupState{inFlight: map[types.UID]map[types.UID]bool{}, members: map[types.NamespacedName]*cycleState{}}
		gcs.Write(stateKey, g)
		return g, nil
	case errors.Is(err, fwk.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	g, ok := d.(*groupState)
	if !ok {
		return nil, fmt.Errorf("%s: pod group cycle state has type %T", Name, d)
	}
	return g, nil
}

// share records that pod shares the allocation of claim uid in flight.
func (g *groupState) share(uid, pod types.UID) {
	if g == nil {
		return
	}
	if g.inFlight[uid] == nil {
		g.inFlight[uid] = map[types.UID]bool{}
	}
	g.inFlight[uid][pod] = true
}

// landed records that the allocation of claim uid left flight.
func (g *groupState) landed(uid types.UID) {
	if g != nil {
		delete(g.inFlight, uid)
	}
}

// sharedAllocation returns the allocation of the claim that a member of
// the group cycle has in flight, as the claim tracker holds it; nil if
// none, or outside a group cycle: only such an allocation may be shared
// before it is written.
func (g *groupState) sharedAllocation(tr fwk.ResourceClaimTracker, c *resourcev1.ResourceClaim) *resourcev1.AllocationResult {
	if g == nil || len(g.inFlight[c.UID]) == 0 {
		return nil
	}
	return tr.GetPendingAllocation(c.UID)
}

// podGroupOf returns the pod's PodGroup from the scheduler's snapshot when
// its claims may be the group's; nil otherwise.
func (pl *Plugin) podGroupOf(pod *v1.Pod) (*schedulingv1beta1.PodGroup, error) {
	if !pl.fts.WorkloadResourceClaims || pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil, nil
	}
	return pl.fh.SnapshotSharedLister().PodGroups().Get(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
}

// consumers sets, for each of the pod's claims, the object PreBind
// reserves it for: the PodGroup for a claim of the pod's group, the pod
// for any other.
func (pl *Plugin) consumers(pod *v1.Pod, claims []podClaim) error {
	group, err := pl.podGroupOf(pod)
	if err != nil {
		return err
	}
	for i := range claims {
		if group == nil || claims[i].extended {
			claims[i].consumer = podConsumer(pod)
			continue
		}
		ref, err := resourceclaim.BindTo(pod, group, &pod.Spec.ResourceClaims[claims[i].index])
		if err != nil {
			return err
		}
		claims[i].consumer = ref
	}
	return nil
}

func podConsumer(pod *v1.Pod) resourcev1.ResourceClaimConsumerReference {
	return resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
}

// reservedFor reports whether the claim is reserved for the pod, or for
// its PodGroup where the gates let claims be the group's.
func (f Features) reservedFor(pod *v1.Pod, c *resourcev1.ResourceClaim) bool {
	return resourceclaim.IsReservedForPod(pod, c, f.WorkloadResourceClaims)
}

// PodGroupPostFilter runs when a pod group cycle found no placement for
// the group. Like the in-tree plugin, it does for each member what
// PostFilter does for a pod (deallocate one allocated claim no node could
// use and that no one else holds); if some member had no such claim and
// no member of the group is scheduled, it frees the group's own claims:
// it deallocates one unusable claim reserved for nobody or for the group
// alone, or else takes the group out of the reservation of one of its
// allocated claims, so that the next cycle can allocate afresh.
func (pl *Plugin) PodGroupPostFilter(ctx context.Context, gcs fwk.PodGroupCycleState, info fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	if info.GetType() == fwk.CompositePodGroupKeyType {
		// Its pods belong to the child groups, which are tried on their own.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if pl.fts.TopologyAwareWorkloadScheduling && info.GetPodGroup() != nil && info.GetPodGroup().Spec.SchedulingConstraints != nil {
		// The placement of such a group is chosen among several; which of
		// its claims no placement could use is not known here.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	var g *groupState
	if d, err := gcs.Read(stateKey); err == nil {
		var ok bool
		if g, ok = d.(*groupState); !ok {
			return nil, asError(logger, fmt.Errorf("%s: pod group cycle state has type %T", Name, d))
		}
	} else if !errors.Is(err, fwk.ErrNotFound) {
		return nil, asError(logger, err)
	}
	pods := unscheduledPods(info)
	stuck := false
	if g != nil {
		for _, pod := range pods {
			s := g.members[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
			if s == nil {
				continue
			}
			// kube-scheduler runs no member's PostFilter in a pod group
			// cycle: the account of each member's rejected nodes goes
			// beside its condition here.
			if account := s.account(); account != "" {
				pl.recordAccount(pod, account)
			}
			found, st := pl.deallocateUnavailable(ctx, pod, s)
			if st.IsError() {
				return nil, st
			}
			stuck = stuck || !found
		}
	}
	if stuck && pl.fts.WorkloadResourceClaims && len(pods) > 0 {
		if st := pl.freeGroupClaims(ctx, g, pods[0]); st != nil {
			return nil, st
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, reasonGroupDone)
}

// freeGroupClaims frees one claim of the pod's group while none of the
// group's pods is scheduled (assumed or bound): with none, nothing uses
// the claims, and the group is inactive for the rest of this synchronous
// cycle. A stale count that still shows a scheduled pod only puts the
// freeing off to a later cycle.
func (pl *Plugin) freeGroupClaims(ctx context.Context, g *groupState, pod *v1.Pod) *fwk.Status {
	logger := klog.FromContext(ctx)
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil
	}
	name := *pod.Spec.SchedulingGroup.PodGroupName
	gs, err := pl.fh.PodGroupManager().PodGroupStates().Get(pod.Namespace, name)
	if err != nil {
		return asError(logger, err)
	}
	if gs.ScheduledPodsCount() > 0 {
		return nil
	}
	group, err := pl.podGroupOf(pod)
	if err != nil {
		return asError(logger, err)
	}
	if group == nil {
		return nil
	}
	if g != nil {
		for _, s := range g.members {
			for i := range s.unavailable {
				c := s.claims[i].claim
				rf := c.Status.ReservedFor
				if c.Status.Allocation == nil || len(rf) > 1 || len(rf) == 1 && rf[0].UID != group.UID {
					continue
				}
				logger.V(5).Info("Deallocating PodGroup ResourceClaim", "podGroup", klog.KObj(group), "resourceclaim", klog.KObj(c))
				if err := pl.binder.deallocate(ctx, c); err != nil {
					return asError(logger, err)
				}
				return fwk.NewStatus(fwk.Unschedulable, reasonGroupDeallocated)
			}
		}
	}
	for i := range group.Spec.ResourceClaims {
		claimName, mustCheckOwner, err := resourceclaim.NameFromPodGroup(group, &group.Spec.ResourceClaims[i])
		if err != nil {
			return asError(logger, err)
		}
		if claimName == nil {
			continue
		}
		c, err := pl.dra.ResourceClaims().Get(group.Namespace, *claimName)
		if err != nil {
			return asError(logger, err)
		}
		if mustCheckOwner && resourceclaim.IsForPodGroup(group, c) != nil {
			continue
		}
		if c.Status.Allocation == nil || !pl.fts.reservedFor(pod, c) {
			continue
		}
		logger.V(5).Info("Unreserving ResourceClaim for PodGroup", "podGroup", klog.KObj(group), "resourceclaim", klog.KObj(c))
		if err := pl.binder.unreserve(ctx, c, group.UID); err != nil {
			// The next cycle of the group gets here again.
			logger.Error(err, "Unreserve ResourceClaim for PodGroup", "resourceclaim", klog.KObj(c))
			continue
		}
		return fwk.NewStatus(fwk.Unschedulable, reasonGroupUnreserved)
	}
	return nil
}
