package api

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, Version and Kind under which a ResourceSlice is read and written.
// Mixins extend resource.k8s.io/v1 in place (KEP-5234 adds fields to the
// existing types behind the DRAResourceSliceMixins gate), so there is no
// separate API version for them.
const (
	GroupName  = resourcev1.GroupName
	Version    = "v1"
	APIVersion = GroupName + "/" + Version
	KindSlice  = "ResourceSlice"
)

// Leaf types shared with upstream, re-exported so that callers of this
// package rarely need to import k8s.io/api/resource/v1 themselves.
type (
	QualifiedName      = resourcev1.QualifiedName
	FullyQualifiedName = resourcev1.FullyQualifiedName
	DeviceAttribute    = resourcev1.DeviceAttribute
	DeviceCapacity     = resourcev1.DeviceCapacity
	Counter            = resourcev1.Counter
	DeviceTaint        = resourcev1.DeviceTaint
	ResourcePool       = resourcev1.ResourcePool
)

// ResourceSlice is resource.k8s.io/v1 ResourceSlice plus KEP-5234 mixins.
// A slice that sets no mixin field is exactly an upstream ResourceSlice.
type ResourceSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ResourceSliceSpec `json:"spec"`
}

// ResourceSliceSpec mirrors resourcev1.ResourceSliceSpec field for field and
// adds Mixins.
type ResourceSliceSpec struct {
	Driver                 string                         `json:"driver"`
	Pool                   ResourcePool                   `json:"pool"`
	NodeName               *string                        `json:"nodeName,omitempty"`
	NodeSelector           *corev1.NodeSelector           `json:"nodeSelector,omitempty"`
	AllNodes               *bool                          `json:"allNodes,omitempty"`
	Devices                []Device                       `json:"devices,omitempty"`
	PerDeviceNodeSelection *bool                          `json:"perDeviceNodeSelection,omitempty"`
	SharedCounters         []CounterSet                   `json:"sharedCounters,omitempty"`
	PartitionTypeAttribute *FullyQualifiedName            `json:"partitionTypeAttribute,omitempty"`
	SkipNodeOperations     []resourcev1.SkipNodeOperation `json:"skipNodeOperations,omitempty"`

	// Mixins defines the mixins that devices, counter sets and device
	// counter consumptions of this slice may include (KEP-5234).
	Mixins *ResourceSliceMixins `json:"mixins,omitempty"`
}

// CounterSet mirrors resourcev1.CounterSet and adds Includes.
type CounterSet struct {
	Name     string             `json:"name"`
	Counters map[string]Counter `json:"counters,omitempty"`

	// Includes names CounterSetMixins of the same slice, applied in order;
	// counters set here win over all of them.
	Includes []string `json:"includes,omitempty"`
}

// Device mirrors resourcev1.Device and adds Includes.
type Device struct {
	Name                     string                                                     `json:"name"`
	Attributes               map[QualifiedName]DeviceAttribute                          `json:"attributes,omitempty"`
	Capacity                 map[QualifiedName]DeviceCapacity                           `json:"capacity,omitempty"`
	ConsumesCounters         []DeviceCounterConsumption                                 `json:"consumesCounters,omitempty"`
	NodeName                 *string                                                    `json:"nodeName,omitempty"`
	NodeSelector             *corev1.NodeSelector                                       `json:"nodeSelector,omitempty"`
	AllNodes                 *bool                                                      `json:"allNodes,omitempty"`
	Taints                   []DeviceTaint                                              `json:"taints,omitempty"`
	BindsToNode              *bool                                                      `json:"bindsToNode,omitempty"`
	BindingConditions        []string                                                   `json:"bindingConditions,omitempty"`
	BindingFailureConditions []string                                                   `json:"bindingFailureConditions,omitempty"`
	AllowMultipleAllocations *bool                                                      `json:"allowMultipleAllocations,omitempty"`
	NodeAllocatableResources map[corev1.ResourceName]resourcev1.NodeAllocatableResource `json:"nodeAllocatableResources,omitempty"`

	// Includes names DeviceMixins of the same slice. Their attributes and
	// capacities are applied in order; the device's own win over all.
	Includes []string `json:"includes,omitempty"`
}

// DeviceCounterConsumption mirrors resourcev1.DeviceCounterConsumption and
// adds Includes.
type DeviceCounterConsumption struct {
	CounterSet          string             `json:"counterSet"`
	Counters            map[string]Counter `json:"counters,omitempty"`
	CompatibilityGroups []string           `json:"compatibilityGroups,omitempty"`

	// Includes names DeviceCounterConsumptionMixins of the same slice. The
	// counter set always comes from this entry, never from a mixin.
	Includes []string `json:"includes,omitempty"`
}

// ResourceSliceMixins holds the three kinds of mixin of KEP-5234.
type ResourceSliceMixins struct {
	Device                   []DeviceMixin                   `json:"device,omitempty"`
	DeviceCounterConsumption []DeviceCounterConsumptionMixin `json:"deviceCounterConsumption,omitempty"`
	CounterSet               []CounterSetMixin               `json:"counterSet,omitempty"`
}

// DeviceMixin is a named group of attributes and capacities.
type DeviceMixin struct {
	Name       string                            `json:"name"`
	Attributes map[QualifiedName]DeviceAttribute `json:"attributes,omitempty"`
	Capacity   map[QualifiedName]DeviceCapacity  `json:"capacity,omitempty"`
}

// DeviceCounterConsumptionMixin is a named pattern of counter consumption,
// without the counter set it is consumed from.
type DeviceCounterConsumptionMixin struct {
	Name     string             `json:"name"`
	Counters map[string]Counter `json:"counters,omitempty"`
}

// CounterSetMixin is a named group of counters that counter sets include.
type CounterSetMixin struct {
	Name     string             `json:"name"`
	Counters map[string]Counter `json:"counters,omitempty"`
}

// ResourceSliceList is a list of ResourceSlices, as returned by a list call.
type ResourceSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceSlice `json:"items"`
}

// UsesMixins reports whether any KEP-5234 field is set in the slice.
func (s *ResourceSlice) UsesMixins() bool {
	if s.Spec.Mixins != nil {
		return true
	}
	for i := range s.Spec.SharedCounters {
		if len(s.Spec.SharedCounters[i].Includes) > 0 {
			return true
		}
	}
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		if len(d.Includes) > 0 {
			return true
		}
		for j := range d.ConsumesCounters {
			if len(d.ConsumesCounters[j].Includes) > 0 {
				return true
			}
		}
	}
	return false
}
