package allocator

import "github.com/dractl/dractl/pkg/core/features"

// gates are the feature gates as the allocator reads them, decided once in
// New. Every place where a gate changes behaviour reads one of these
// fields; with a gate off, the allocator does what upstream's does with it
// off.
type gates struct {
	adminAccess     bool // requests may ask for admin access
	prioritizedList bool // requests may have firstAvailable subrequests
	// partitionable: counter sets and per-device node selection are used;
	// off, slices with either are ignored and devices that consume
	// counters are never allocated.
	partitionable bool
	taints        bool // device taints block allocation
	// bindingConditions: devices with binding conditions may be allocated
	// (DRADeviceBindingConditions together with
	// DRAResourceClaimDeviceStatus, as kube-scheduler combines them).
	bindingConditions bool
	// consumable: capacity requests, request policies and devices that
	// allow multiple allocations; off, every device is allocated whole.
	consumable bool
	fractional bool // fractional request policy ranges use milli units
	listAttrs  bool // constraints compare list-valued attributes as sets
	nodeOps    bool // slices that skip node operations may be used
	derived    bool // requests may define derived attributes
	// compat: compatibility groups are honoured; off, slices that declare
	// them are ignored (which leaves their pool incomplete).
	compat bool
}

func newGates(s features.Set) gates {
	return gates{
		adminAccess:       s.Enabled(features.AdminAccess),
		prioritizedList:   s.Enabled(features.PrioritizedList),
		partitionable:     s.Enabled(features.PartitionableDevices),
		taints:            s.Enabled(features.DeviceTaints),
		bindingConditions: s.Enabled(features.DeviceBindingConditions) && s.Enabled(features.ResourceClaimDeviceStatus),
		consumable:        s.Enabled(features.ConsumableCapacity),
		fractional:        s.Enabled(features.FractionalCapacityRange),
		listAttrs:         s.Enabled(features.ListTypeAttributes),
		nodeOps:           s.Enabled(features.OptionalNodeOperations),
		derived:           s.Enabled(features.DerivedAttributes),
		compat:            s.Enabled(features.DeviceCompatibilityGroups),
	}
}
