// Package features names the Kubernetes feature gates that change how DRA
// devices are allocated, with the names kube-scheduler 1.37 reads them by
// (k8s.io/kubernetes pkg/features), and holds a set of them.
//
// dractl enables every gate by default: it implements everything the
// structured allocator of Kubernetes 1.37 knows. A Set with a gate off
// makes the allocator behave as upstream's does with that gate off, so that
// a cluster that runs with a gate disabled sees the same answers.
package features

import (
	"slices"
	"strings"
)

// Gate is the name of a Kubernetes feature gate.
type Gate string

// The gates the allocator reads, with the KEP that specifies each where one
// does.
const (
	// AdminAccess: requests with adminAccess (KEP-5018).
	AdminAccess Gate = "DRAAdminAccess"
	// PrioritizedList: firstAvailable subrequests (KEP-4816).
	PrioritizedList Gate = "DRAPrioritizedList"
	// PartitionableDevices: shared counters, counter consumption and
	// per-device node selection (KEP-4815).
	PartitionableDevices Gate = "DRAPartitionableDevices"
	// DeviceTaints: device taints and request tolerations (KEP-5055).
	DeviceTaints Gate = "DRADeviceTaints"
	// DeviceBindingConditions: devices with binding conditions (KEP-5007).
	// The allocator uses them only when ResourceClaimDeviceStatus is on
	// too, as kube-scheduler does.
	DeviceBindingConditions Gate = "DRADeviceBindingConditions"
	// ResourceClaimDeviceStatus: device status in claims (KEP-4817).
	ResourceClaimDeviceStatus Gate = "DRAResourceClaimDeviceStatus"
	// ConsumableCapacity: allowMultipleAllocations and capacity requests
	// (KEP-5075).
	ConsumableCapacity Gate = "DRAConsumableCapacity"
	// FractionalCapacityRange: request policy ranges with fractional
	// values (KEP-5075).
	FractionalCapacityRange Gate = "DRAFractionalCapacityRange"
	// ListTypeAttributes: list-valued attributes in constraints.
	ListTypeAttributes Gate = "DRAListTypeAttributes"
	// OptionalNodeOperations: slices that skip node operations.
	OptionalNodeOperations Gate = "DRAOptionalNodeOperations"
	// DerivedAttributes: request-scoped attributes computed by CEL.
	DerivedAttributes Gate = "DRADerivedAttributes"
	// DeviceCompatibilityGroups: compatibility groups on counter
	// consumption (KEP-4815 follow-up).
	DeviceCompatibilityGroups Gate = "DRADeviceCompatibilityGroups"
	// ResourceSliceMixins: device, counter set and counter consumption
	// mixins and the includes that name them (KEP-5234). Off, devices and
	// counter sets that include mixins are dropped, and so are devices
	// consuming a dropped counter set (KEP-5234 "Implementation").
	ResourceSliceMixins Gate = "DRAResourceSliceMixins"
)

// gates lists every Gate in a fixed order; a Gate's bit in Set is its
// index here.
var gates = []Gate{
	AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints,
	DeviceBindingConditions, ResourceClaimDeviceStatus, ConsumableCapacity,
	FractionalCapacityRange, ListTypeAttributes, OptionalNodeOperations,
	DerivedAttributes, DeviceCompatibilityGroups, ResourceSliceMixins,
}

// Dependencies are the gates each gate needs, as Kubernetes declares them
// (among the gates listed here): a gate that is on while one it depends on
// is off is a configuration kube-scheduler refuses to start with.
var Dependencies = map[Gate][]Gate{
	DeviceBindingConditions:   {ResourceClaimDeviceStatus},
	DeviceCompatibilityGroups: {PartitionableDevices},
	FractionalCapacityRange:   {ConsumableCapacity},
}

// Gates returns every gate, in a fixed order.
func Gates() []Gate { return slices.Clone(gates) }

// Known reports whether g is one of Gates.
func Known(g Gate) bool { return slices.Contains(gates, g) }

// Set is a set of enabled gates. The zero value enables every gate. A Set
// is a small value: copy it freely.
type Set struct {
	off uint32 // bit i: gates[i] is disabled
}

// All enables every gate; it is the zero Set.
func All() Set { return Set{} }

// None disables every gate.
func None() Set { return Set{off: 1<<len(gates) - 1} }

// Enabled reports whether g is on. Gates this package does not know are
// off.
func (s Set) Enabled(g Gate) bool {
	i := slices.Index(gates, g)
	return i >= 0 && s.off&(1<<i) == 0
}

// With returns s with g set to on. Unknown gates leave s unchanged.
func (s Set) With(g Gate, on bool) Set {
	i := slices.Index(gates, g)
	switch {
	case i < 0:
	case on:
		s.off &^= 1 << i
	default:
		s.off |= 1 << i
	}
	return s
}

// String lists the disabled gates in --feature-gates form
// ("DRAAdminAccess=false,..."), or "all enabled".
func (s Set) String() string {
	var parts []string
	for _, g := range gates {
		if !s.Enabled(g) {
			parts = append(parts, string(g)+"=false")
		}
	}
	if len(parts) == 0 {
		return "all enabled"
	}
	return strings.Join(parts, ",")
}
