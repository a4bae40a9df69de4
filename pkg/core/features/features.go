// Package features names the Kubernetes feature gates dractl reads, with
// the names kube-scheduler 1.37 reads them by (k8s.io/kubernetes
// pkg/core/features): the gates that change how DRA devices are allocated,
// which a Set holds, and the scheduler plugin's own. It is the one place
// for each gate's name, stage and dependencies, for what a node declares
// for a gated feature, and for the words a refusal uses.
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

// The gates only the scheduler plugin reads: they change what happens
// around allocation, not what the allocator finds.
const (
	// SchedulerFilterTimeout: Filter gives up on a node after the
	// plugin's filterTimeout.
	SchedulerFilterTimeout Gate = "DRASchedulerFilterTimeout"
	// DeviceTaintRules: DeviceTaintRule objects taint the devices they
	// select (KEP-5055).
	DeviceTaintRules Gate = "DRADeviceTaintRules"
	// WorkloadResourceClaims: claims of a PodGroup shared by its pods
	// (KEP-5729).
	WorkloadResourceClaims Gate = "DRAWorkloadResourceClaims"
	// NodeAllocatableResources: devices that stand for node CPU, memory
	// or hugepages count against the node (KEP-5517).
	NodeAllocatableResources Gate = "DRANodeAllocatableResources"
	// PodLevelResources: pod-level requests and limits, which bound what
	// a pod's devices may add to its containers (KEP-2837).
	PodLevelResources Gate = "PodLevelResources"
	// ExtendedResource: extended resources that a DeviceClass backs are
	// allocated through DRA where no device plugin advertises them, in a
	// claim the scheduler creates for the pod (KEP-5004). GA and locked
	// on in Kubernetes 1.37.
	ExtendedResource Gate = "DRAExtendedResource"
)

// NodeFeatureOptionalNodeOperations is what a node lists in
// status.declaredFeatures when it can run pods whose devices skip node
// operations; a pod that needs it fits no other node. Kubernetes names the
// node feature after the gate.
const NodeFeatureOptionalNodeOperations = string(OptionalNodeOperations)

// Refusals are upstream's words for a claim that uses a feature whose gate
// is off. The allocator and the scheduler plugin both say them, so a
// refusal reads the same from every component.
const (
	RefusalSubrequests = "has subrequests, but the DRAPrioritizedList feature is disabled"
	RefusalCapacity    = "has capacity requests, but the DRAConsumableCapacity feature is disabled"
	RefusalDerived     = "cannot handle request with derived attributes, the feature is disabled"
	RefusalAdminAccess = "admin access is requested, but the feature is disabled"
)

// Stage is a gate's maturity in Kubernetes 1.37.
type Stage string

// The stages, as k8s.io/component-base/featuregate names them.
const (
	Alpha Stage = "ALPHA"
	Beta  Stage = "BETA"
	GA    Stage = ""
)

// stages are the gates' maturity in Kubernetes 1.37, which --help shows
// and AllAlpha/AllBeta act on. dractl enables every gate by default and
// locks none, so that a cluster of any release can be modelled.
var stages = map[Gate]Stage{
	AdminAccess:               GA,
	PrioritizedList:           GA,
	ResourceClaimDeviceStatus: GA,
	DeviceTaints:              GA,
	PartitionableDevices:      Beta,
	ConsumableCapacity:        Beta,
	DeviceBindingConditions:   Beta,
	FractionalCapacityRange:   Beta,
	ListTypeAttributes:        Alpha,
	OptionalNodeOperations:    Alpha,
	DerivedAttributes:         Alpha,
	DeviceCompatibilityGroups: Alpha,
	ResourceSliceMixins:       Alpha,
	SchedulerFilterTimeout:    Beta,
	DeviceTaintRules:          GA,
	WorkloadResourceClaims:    Beta,
	NodeAllocatableResources:  Alpha,
	PodLevelResources:         Beta,
	ExtendedResource:          GA,
}

// StageOf returns g's maturity in Kubernetes 1.37, false for a gate this
// package does not know.
func StageOf(g Gate) (Stage, bool) {
	s, ok := stages[g]
	return s, ok
}

// gates lists every Gate in a fixed order; a Gate's bit in Set is its
// index here.
var gates = []Gate{
	AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints,
	DeviceBindingConditions, ResourceClaimDeviceStatus, ConsumableCapacity,
	FractionalCapacityRange, ListTypeAttributes, OptionalNodeOperations,
	DerivedAttributes, DeviceCompatibilityGroups, ResourceSliceMixins,
}

// schedulerGates are the plugin's own gates, in a fixed order.
var schedulerGates = []Gate{SchedulerFilterTimeout, DeviceTaintRules, WorkloadResourceClaims, ExtendedResource, NodeAllocatableResources, PodLevelResources}

// SchedulerGates returns the gates only the scheduler plugin reads.
func SchedulerGates() []Gate { return slices.Clone(schedulerGates) }

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
