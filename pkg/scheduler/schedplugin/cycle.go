package schedplugin

import (
	"fmt"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/state"
)

const stateKey fwk.StateKey = Name

// cycleState is what one pod's scheduling cycle knows, from PreFilter to
// PreBind. Filter writes it from many goroutines, under mu.
type cycleState struct {
	claims []podClaim
	// availableOn is the node selector of each allocated claim's
	// allocation (nil: every node, or not allocated).
	availableOn []*nodeaffinity.NodeSelector
	// shared is, for each claim, the allocation another member of the
	// pod's group cycle has in flight and this pod uses as is (see
	// podgroup.go); nil for the others.
	shared []*resourcev1.AllocationResult
	// pending are the indices (into claims) of the claims to allocate, in
	// the order the Cycle allocates them.
	pending []int
	snap    *state.Snapshot
	// cycle allocates the pending claims; nil when there are none.
	cycle *state.Cycle
	// toAllocate are the pending claims, and opts the options, that
	// cycle was made with (extended-resource variants add to them).
	toAllocate []*resourcev1.ResourceClaim
	opts       state.CycleOptions
	// ext is the pod's extended-resource claim yet to be created; nil
	// when the pod asks for no extended resource a DeviceClass backs,
	// or an earlier attempt created the claim (stale).
	ext *extendedState
	// stale is the extended-resource claim an earlier attempt created:
	// every node rejects the pod, and PostFilter deletes it.
	stale *resourcev1.ResourceClaim
	// mark is the waitlist's mark, read before snap was taken.
	mark uint64

	// mu guards what Filter writes per node: results, unavailable,
	// rejected, invalid, waiting, nodeStatuses and the variant maps of
	// ext. Filter runs on many nodes in parallel goroutines, and again
	// during preemption's dry runs, which PostFilter starts in parallel
	// on clones that share this state (Clone); Score, PostFilter and
	// Reserve read those fields and take mu for that reason. The fields
	// above mu are set in PreFilter, before any Filter, and only read
	// afterwards; the ones Reserve sets below are the binding cycle's,
	// one goroutine at a time, and need no lock. It is the cycle's own,
	// not one of the plugin's: the Filters of one pod wait only for each
	// other, never for another pod's cycle or the informers' handlers.
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
	// claim; which of them are in flight in the framework's claim tracker
	// (signalled by Reserve, until PreBind wrote them or Unreserve took
	// them back); and which of them PreBind wrote.
	allocations []*resourcev1.AllocationResult
	inFlight    []bool
	written     []bool
	// nodeStatuses are the pod's nodeAllocatableResourceClaimStatuses on
	// each node that fit (under mu); reservedStatuses the chosen node's;
	// statusesWritten: PreBind sent them to the pod (KEP-5517, see
	// nodealloc.go).
	nodeStatuses     map[string][]v1.NodeAllocatableResourceClaimStatus
	reservedStatuses []v1.NodeAllocatableResourceClaimStatus
	statusesWritten  bool
	// sharing are the claims (indices) whose shared allocation Reserve
	// counted this pod a sharer of in the claim tracker, until PreBind or
	// Unreserve.
	sharing map[int]bool
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
