package schedplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/scheduler/nodealloc"
)

// Node allocatable resources through DRA (KEP-5517, gate
// DRANodeAllocatableResources): devices may stand for CPU, memory or
// hugepages of their node. Filter counts them with the pod's own requests
// against what the node has left, PreBind writes the pod's
// status.nodeAllocatableResourceClaimStatuses (which the kubelet sizes the
// pod by), Unreserve clears it. The arithmetic is pkg/scheduler/nodealloc's.
//
// kube-scheduler copies the statuses into the pod it assumes only from the
// in-tree plugin's cycle state, so its cache counts a pod this plugin
// placed without them until the informer brings the bound pod with its
// status. footprints bridges that gap.

// nodeResources is the plugin's part in KEP-5517 across the phases:
// Filter's fit of the devices' node resources (fit), the footprint
// Reserve counts (reserve), the statuses PreBind writes into the pod
// (write) and Unreserve clears (unreserve). It owns the footprints, which
// outlive the cycles: the pod informer's handler forgets them
// (forgetGone).
type nodeResources struct {
	clientset kubernetes.Interface
	fts       Features
	// footprints are the node resources of placed pods the scheduler's
	// cache does not count yet.
	footprints footprints
}

// footprints are what pods this plugin placed take from their node beyond
// their containers' requests, kept from Reserve until the scheduler's
// cache holds the pod with its statuses (or the pod is gone).
type footprints struct {
	// mu guards nodes: Reserve adds, the pod informer's handler forgets,
	// and Filter reads on many goroutines. It is not a cycle's lock
	// (cycleState.mu): the footprints are every cycle's, and a Filter
	// holds this one only to sum a node's, never while it allocates.
	mu    sync.Mutex
	nodes map[string]map[types.UID]nodealloc.Amounts
}

func (f *footprints) add(node string, pod types.UID, extra nodealloc.Amounts) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nodes == nil {
		f.nodes = map[string]map[types.UID]nodealloc.Amounts{}
	}
	if f.nodes[node] == nil {
		f.nodes[node] = map[types.UID]nodealloc.Amounts{}
	}
	f.nodes[node][pod] = extra
}

func (f *footprints) forget(pod types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for node, pods := range f.nodes {
		delete(pods, pod)
		if len(pods) == 0 {
			delete(f.nodes, node)
		}
	}
}

// on sums the footprints of the node's pods that nodeInfo does not count
// yet, and drops the ones it does.
func (f *footprints) on(nodeInfo fwk.NodeInfo) nodealloc.Amounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	node := nodeInfo.Node().Name
	pods := f.nodes[node]
	if len(pods) == 0 {
		return nodealloc.Amounts{}
	}
	for _, pi := range nodeInfo.GetPods() {
		p := pi.GetPod()
		if _, ok := pods[p.UID]; ok && len(p.Status.NodeAllocatableResourceClaimStatuses) > 0 {
			delete(pods, p.UID)
		}
	}
	var sum nodealloc.Amounts
	for _, a := range pods {
		sum = sum.Add(a)
	}
	if len(pods) == 0 {
		delete(f.nodes, node)
	}
	return sum
}

// forgetGone forgets the footprints of pods the informer reports deleted.
func (n *nodeResources) forgetGone(pods cache.SharedIndexInformer) error {
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				n.footprints.forget(p.UID)
			}
		},
	})
	return err
}

// fit is Filter's KEP-5517 step for one node; res are the
// allocations the node would give the pending claims (nil: none pending).
// It records the statuses the pod would get there.
func (n *nodeResources) fit(logger klog.Logger, s *cycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo, res []*resourcev1.AllocationResult) *fwk.Status {
	if !n.fts.NodeAllocatableResources || s.snap == nil {
		return nil
	}
	devices := deviceResources(s.snap)
	pendingAt := make(map[int]int, len(s.pending))
	for j, i := range s.pending {
		pendingAt[i] = j
	}
	claims := make([]nodealloc.Claim, 0, len(s.claims))
	for i, pc := range s.claims {
		a := pc.claim.Status.Allocation
		// Allocated by an earlier member of this pod group cycle: in use
		// by another pod as much as a claim reserved for one.
		inGroup := a == nil && i < len(s.shared) && s.shared[i] != nil
		if inGroup {
			a = s.shared[i]
		}
		if j, ok := pendingAt[i]; ok && j < len(res) {
			a = res[j]
		} else if a != nil && (inGroup || len(pc.claim.Status.ReservedFor) > 0 && !n.fts.reservedFor(pod, pc.claim)) && nodealloc.Mapped(a, devices) {
			return unresolvable(logger, fmt.Sprintf(whyMappedShared, pc.claim.Name))
		}
		if a != nil {
			claims = append(claims, nodealloc.Claim{Entry: pc.name, Name: pc.claim.Name, Allocation: a})
		}
	}
	statuses, err := nodealloc.Statuses(pod, claims, devices)
	if err != nil {
		return asError(logger, err)
	}
	if len(statuses) == 0 {
		return nil
	}
	if n.fts.PodLevelResources {
		if why := nodealloc.PodLevelShortfall(pod, statuses); why != "" {
			return unresolvable(logger, why)
		}
	}
	demand := nodealloc.Demand(pod, statuses, n.fts.PodLevelResources)
	requested := amountsOf(nodeInfo.GetRequested()).Add(n.footprints.on(nodeInfo))
	if reasons, unres := nodealloc.Fit(demand, amountsOf(nodeInfo.GetAllocatable()), requested); len(reasons) > 0 {
		code := fwk.Unschedulable
		if unres {
			code = fwk.UnschedulableAndUnresolvable
		}
		return fwk.NewStatus(code, reasons...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodeStatuses == nil {
		s.nodeStatuses = map[string][]v1.NodeAllocatableResourceClaimStatus{}
	}
	s.nodeStatuses[nodeInfo.Node().Name] = statuses
	return nil
}

// reserve counts the pod's footprint on the chosen node.
func (n *nodeResources) reserve(s *cycleState, pod *v1.Pod, node string) {
	s.mu.Lock()
	statuses := s.nodeStatuses[node]
	s.mu.Unlock()
	s.reservedStatuses = statuses
	if len(statuses) > 0 {
		n.footprints.add(node, pod.UID, nodealloc.AmountsOf(nodealloc.Extra(pod, statuses, n.fts.PodLevelResources)))
	}
}

// write records the statuses in the pod before it is bound,
// so that the kubelet sizes it with its devices' node resources.
func (n *nodeResources) write(ctx context.Context, s *cycleState, pod *v1.Pod) error {
	if len(s.reservedStatuses) == 0 {
		return nil
	}
	patch, err := statusesPatch(pod.UID, s.reservedStatuses)
	if err != nil {
		return err
	}
	// Written whatever the outcome: Unreserve clears an unknown one.
	s.statusesWritten = true
	if _, err := n.clientset.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("pod %s: write nodeAllocatableResourceClaimStatuses: %w", klog.KObj(pod), err)
	}
	return nil
}

// unreserve forgets the footprint and clears statuses
// PreBind wrote, unless the pod may be bound (see Unreserve).
func (n *nodeResources) unreserve(ctx context.Context, logger klog.Logger, s *cycleState, pod *v1.Pod) {
	n.footprints.forget(pod.UID)
	if !s.statusesWritten || s.preBound {
		return
	}
	// An explicit empty list: a merge patch cannot tell a missing field
	// from one to clear. The uid keeps the patch off a namesake.
	patch, err := statusesPatch(pod.UID, []v1.NodeAllocatableResourceClaimStatus{})
	if err == nil {
		_, err = n.clientset.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	if err != nil {
		// The next attempt writes the statuses again.
		logger.Error(err, "Unreserve: clear nodeAllocatableResourceClaimStatuses", "pod", klog.KObj(pod))
		return
	}
	s.statusesWritten = false
}

func statusesPatch(uid types.UID, statuses []v1.NodeAllocatableResourceClaimStatus) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status":   map[string]any{"nodeAllocatableResourceClaimStatuses": statuses},
	})
}

// deviceResources looks devices up in the snapshot's pools.
func deviceResources(snap *state.Snapshot) nodealloc.Devices {
	return func(r *resourcev1.DeviceRequestAllocationResult) (map[v1.ResourceName]resourcev1.NodeAllocatableResource, error) {
		p, ok := snap.Pool(pool.ID{Driver: r.Driver, Pool: r.Pool})
		if !ok {
			return nil, fmt.Errorf("pool %s/%s not found", r.Driver, r.Pool)
		}
		for _, sl := range p.Slices {
			for i := range sl.Spec.Devices {
				if sl.Spec.Devices[i].Name == r.Device {
					return sl.Spec.Devices[i].NodeAllocatableResources, nil
				}
			}
		}
		return nil, fmt.Errorf("device %s not found in pool %s/%s", r.Device, r.Driver, r.Pool)
	}
}

// amountsOf reads the framework's resource counts.
func amountsOf(r fwk.Resource) nodealloc.Amounts {
	// Scalar is only read (Add copies).
	return nodealloc.Amounts{MilliCPU: r.GetMilliCPU(), Memory: r.GetMemory(), EphemeralStorage: r.GetEphemeralStorage(), Scalar: r.GetScalarResources()}
}
