package schedplugin

import (
	"k8s.io/component-base/featuregate"

	"github.com/dractl/dractl/pkg/core/features"
)

// Features are the kube-scheduler feature gates the plugin obeys: the
// allocator's (Allocation, handed to the State) and the plugin's own.
type Features struct {
	// Allocation are the DRA gates of the allocator.
	Allocation features.Set
	// BindingConditions: DRADeviceBindingConditions and
	// DRAResourceClaimDeviceStatus, both needed, as in-tree.
	BindingConditions bool
	// FilterTimeout: DRASchedulerFilterTimeout.
	FilterTimeout bool
	// PrioritizedList: DRAPrioritizedList, which the FirstFit score ranks.
	PrioritizedList bool
	// DeviceTaintRules: DRADeviceTaintRules, whose objects the State
	// applies to the slices.
	DeviceTaintRules bool
	// WorkloadResourceClaims: DRAWorkloadResourceClaims, under which a
	// pod's template claim may be its PodGroup's.
	WorkloadResourceClaims bool
	// NodeAllocatableResources: DRANodeAllocatableResources, devices that
	// stand for node CPU, memory or hugepages (KEP-5517).
	NodeAllocatableResources bool
	// PodLevelResources: pod-level requests and limits, which bound the
	// node resources a pod's devices add.
	PodLevelResources bool
	// ExtendedResource: DRAExtendedResource, extended resources that
	// DeviceClasses back (KEP-5004).
	ExtendedResource bool
	// TopologyAwareWorkloadScheduling: kube-scheduler chooses among
	// placements for a PodGroup with scheduling constraints, whose claims
	// PodGroupPostFilter then leaves alone, as in-tree.
	TopologyAwareWorkloadScheduling bool
}

// topologyAwareWorkloadScheduling is kube-scheduler's gate of that name
// (alpha in 1.37); it is not a DRA gate, so pkg/core/features does not list it.
const topologyAwareWorkloadScheduling = "TopologyAwareWorkloadScheduling"

// AllFeatures is every feature on, which is what the plugin assumes
// without a feature gate.
var AllFeatures = Features{Allocation: features.All(), BindingConditions: true, FilterTimeout: true, PrioritizedList: true, DeviceTaintRules: true, WorkloadResourceClaims: true, TopologyAwareWorkloadScheduling: true, ExtendedResource: true, NodeAllocatableResources: true, PodLevelResources: true}

// FeaturesFrom reads the gates from kube-scheduler's feature gate. A gate
// fg does not know counts as on, so that a gate removed upstream after
// graduating keeps its feature.
func FeaturesFrom(fg featuregate.FeatureGate) Features {
	if fg == nil {
		return AllFeatures
	}
	known := fg.DeepCopy().GetAll()
	knows := func(f featuregate.Feature) bool {
		_, ok := known[f]
		return ok
	}
	on := func(g features.Gate) bool {
		return !knows(featuregate.Feature(g)) || fg.Enabled(featuregate.Feature(g))
	}
	alloc := features.All()
	for _, g := range features.Gates() {
		alloc = alloc.With(g, on(g))
	}
	return Features{
		Allocation:             alloc,
		BindingConditions:      on(features.DeviceBindingConditions) && on(features.ResourceClaimDeviceStatus),
		FilterTimeout:          on(features.SchedulerFilterTimeout),
		PrioritizedList:        on(features.PrioritizedList),
		DeviceTaintRules:       on(features.DeviceTaintRules),
		WorkloadResourceClaims: on(features.WorkloadResourceClaims),
		// Unknown to fg: a scheduler without it has no such placements.
		TopologyAwareWorkloadScheduling: knows(topologyAwareWorkloadScheduling) && fg.Enabled(topologyAwareWorkloadScheduling),
		NodeAllocatableResources:        on(features.NodeAllocatableResources),
		PodLevelResources:               on(features.PodLevelResources),
		ExtendedResource:                on(features.ExtendedResource),
	}
}
