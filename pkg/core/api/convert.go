package api

import (
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
)

// The shallow converters below copy field for field between our types and
// the upstream ones. Deep copies reuse upstream's generated DeepCopy, so the
// two models cannot drift apart on the fields they share.

func deviceToV1(d *Device) resourcev1.Device {
	out := resourcev1.Device{
		Name:                     d.Name,
		Attributes:               d.Attributes,
		Capacity:                 d.Capacity,
		NodeName:                 d.NodeName,
		NodeSelector:             d.NodeSelector,
		AllNodes:                 d.AllNodes,
		Taints:                   d.Taints,
		BindsToNode:              d.BindsToNode,
		BindingConditions:        d.BindingConditions,
		BindingFailureConditions: d.BindingFailureConditions,
		AllowMultipleAllocations: d.AllowMultipleAllocations,
		NodeAllocatableResources: d.NodeAllocatableResources,
	}
	if d.ConsumesCounters != nil {
		out.ConsumesCounters = make([]resourcev1.DeviceCounterConsumption, len(d.ConsumesCounters))
		for i, c := range d.ConsumesCounters {
			out.ConsumesCounters[i] = resourcev1.DeviceCounterConsumption{
				CounterSet:          c.CounterSet,
				Counters:            c.Counters,
				CompatibilityGroups: c.CompatibilityGroups,
			}
		}
	}
	return out
}

func deviceFromV1(d *resourcev1.Device) Device {
	var cons []DeviceCounterConsumption
	if d.ConsumesCounters != nil {
		cons = make([]DeviceCounterConsumption, len(d.ConsumesCounters))
	}
	return deviceFromV1Into(d, cons)
}

// deviceFromV1Into is deviceFromV1 with cons (as long as d's consumption
// list, nil when it is nil) to hold the converted consumption list.
func deviceFromV1Into(d *resourcev1.Device, cons []DeviceCounterConsumption) Device {
	out := Device{
		Name:                     d.Name,
		Attributes:               d.Attributes,
		Capacity:                 d.Capacity,
		NodeName:                 d.NodeName,
		NodeSelector:             d.NodeSelector,
		AllNodes:                 d.AllNodes,
		Taints:                   d.Taints,
		BindsToNode:              d.BindsToNode,
		BindingConditions:        d.BindingConditions,
		BindingFailureConditions: d.BindingFailureConditions,
		AllowMultipleAllocations: d.AllowMultipleAllocations,
		NodeAllocatableResources: d.NodeAllocatableResources,
	}
	if d.ConsumesCounters != nil {
		out.ConsumesCounters = cons
		for i, c := range d.ConsumesCounters {
			out.ConsumesCounters[i] = DeviceCounterConsumption{
				CounterSet:          c.CounterSet,
				Counters:            c.Counters,
				CompatibilityGroups: c.CompatibilityGroups,
			}
		}
	}
	return out
}

func specToV1(s *ResourceSliceSpec) resourcev1.ResourceSliceSpec {
	out := resourcev1.ResourceSliceSpec{
		Driver:                 s.Driver,
		Pool:                   s.Pool,
		NodeName:               s.NodeName,
		NodeSelector:           s.NodeSelector,
		AllNodes:               s.AllNodes,
		PerDeviceNodeSelection: s.PerDeviceNodeSelection,
		PartitionTypeAttribute: s.PartitionTypeAttribute,
		SkipNodeOperations:     s.SkipNodeOperations,
	}
	if s.Devices != nil {
		out.Devices = make([]resourcev1.Device, len(s.Devices))
		for i := range s.Devices {
			out.Devices[i] = deviceToV1(&s.Devices[i])
		}
	}
	if s.SharedCounters != nil {
		out.SharedCounters = make([]resourcev1.CounterSet, len(s.SharedCounters))
		for i, cs := range s.SharedCounters {
			out.SharedCounters[i] = resourcev1.CounterSet{Name: cs.Name, Counters: cs.Counters}
		}
	}
	return out
}

func specFromV1(s *resourcev1.ResourceSliceSpec) ResourceSliceSpec {
	out := ResourceSliceSpec{
		Driver:                 s.Driver,
		Pool:                   s.Pool,
		NodeName:               s.NodeName,
		NodeSelector:           s.NodeSelector,
		AllNodes:               s.AllNodes,
		PerDeviceNodeSelection: s.PerDeviceNodeSelection,
		PartitionTypeAttribute: s.PartitionTypeAttribute,
		SkipNodeOperations:     s.SkipNodeOperations,
	}
	if s.Devices != nil {
		// The devices' consumption lists share one allocation: a
		// cluster's slices hold hundreds of thousands of devices.
		n := 0
		for i := range s.Devices {
			n += len(s.Devices[i].ConsumesCounters)
		}
		cons := make([]DeviceCounterConsumption, n)
		out.Devices = make([]Device, len(s.Devices))
		for i := range s.Devices {
			d := &s.Devices[i]
			var own []DeviceCounterConsumption
			if d.ConsumesCounters != nil {
				k := len(d.ConsumesCounters)
				own, cons = cons[:k:k], cons[k:]
			}
			out.Devices[i] = deviceFromV1Into(d, own)
		}
	}
	if s.SharedCounters != nil {
		out.SharedCounters = make([]CounterSet, len(s.SharedCounters))
		for i, cs := range s.SharedCounters {
			out.SharedCounters[i] = CounterSet{Name: cs.Name, Counters: cs.Counters}
		}
	}
	return out
}

// FromUpstream converts an upstream ResourceSlice. The result shares no memory
// with in.
func FromUpstream(in *resourcev1.ResourceSlice) *ResourceSlice {
	return FromUpstreamShared(in.DeepCopy())
}

// FromUpstreamShared converts an upstream ResourceSlice without copying what it
// holds: the result shares every map, pointer and leaf slice with in; only
// the device and counter set lists are new, to hold this package's types.
// in must not be modified while the result is in use, which is the
// contract of the objects an informer hands out.
func FromUpstreamShared(in *resourcev1.ResourceSlice) *ResourceSlice {
	out := &ResourceSlice{TypeMeta: in.TypeMeta, ObjectMeta: in.ObjectMeta, Spec: specFromV1(&in.Spec)}
	out.APIVersion, out.Kind = APIVersion, KindSlice
	return out
}

// ToUpstream flattens the slice's mixins and converts it to the upstream type,
// which is what a kube-apiserver without KEP-5234 accepts. It fails only
// when an include names an unknown mixin.
func ToUpstream(in *ResourceSlice) (*resourcev1.ResourceSlice, error) {
	flat, err := Flatten(in)
	if err != nil {
		return nil, err
	}
	out := &resourcev1.ResourceSlice{TypeMeta: flat.TypeMeta, ObjectMeta: flat.ObjectMeta, Spec: specToV1(&flat.Spec)}
	out.APIVersion, out.Kind = APIVersion, KindSlice
	return out, nil
}

// DeepCopy returns a copy of the device that shares no memory with d.
func (d *Device) DeepCopy() *Device {
	if d == nil {
		return nil
	}
	v := deviceToV1(d)
	out := deviceFromV1(v.DeepCopy())
	out.Includes = slices.Clone(d.Includes)
	for i := range out.ConsumesCounters {
		out.ConsumesCounters[i].Includes = slices.Clone(d.ConsumesCounters[i].Includes)
	}
	return &out
}

// DeepCopy returns a copy of the slice that shares no memory with s.
func (s *ResourceSlice) DeepCopy() *ResourceSlice {
	if s == nil {
		return nil
	}
	v := resourcev1.ResourceSlice{TypeMeta: s.TypeMeta, ObjectMeta: s.ObjectMeta, Spec: specToV1(&s.Spec)}
	c := v.DeepCopy()
	out := &ResourceSlice{TypeMeta: c.TypeMeta, ObjectMeta: c.ObjectMeta, Spec: specFromV1(&c.Spec)}
	for i := range out.Spec.Devices {
		src := &s.Spec.Devices[i]
		out.Spec.Devices[i].Includes = slices.Clone(src.Includes)
		for j := range out.Spec.Devices[i].ConsumesCounters {
			out.Spec.Devices[i].ConsumesCounters[j].Includes = slices.Clone(src.ConsumesCounters[j].Includes)
		}
	}
	for i := range out.Spec.SharedCounters {
		out.Spec.SharedCounters[i].Includes = slices.Clone(s.Spec.SharedCounters[i].Includes)
	}
	out.Spec.Mixins = s.Spec.Mixins.DeepCopy()
	return out
}

// DeepCopy returns a copy of the mixins that shares no memory with m.
func (m *ResourceSliceMixins) DeepCopy() *ResourceSliceMixins {
	if m == nil {
		return nil
	}
	out := &ResourceSliceMixins{}
	if m.Device != nil {
		out.Device = make([]DeviceMixin, len(m.Device))
		for i, dm := range m.Device {
			// A device carrying only the mixin's fields reuses upstream's copier.
			v := resourcev1.Device{Attributes: dm.Attributes, Capacity: dm.Capacity}
			c := v.DeepCopy()
			out.Device[i] = DeviceMixin{Name: dm.Name, Attributes: c.Attributes, Capacity: c.Capacity}
		}
	}
	if m.DeviceCounterConsumption != nil {
		out.DeviceCounterConsumption = make([]DeviceCounterConsumptionMixin, len(m.DeviceCounterConsumption))
		for i, cm := range m.DeviceCounterConsumption {
			out.DeviceCounterConsumption[i] = DeviceCounterConsumptionMixin{Name: cm.Name, Counters: copyCounters(cm.Counters)}
		}
	}
	if m.CounterSet != nil {
		out.CounterSet = make([]CounterSetMixin, len(m.CounterSet))
		for i, cm := range m.CounterSet {
			out.CounterSet[i] = CounterSetMixin{Name: cm.Name, Counters: copyCounters(cm.Counters)}
		}
	}
	return out
}

func copyCounters(in map[string]Counter) map[string]Counter {
	if in == nil {
		return nil
	}
	out := make(map[string]Counter, len(in))
	for k, v := range in {
		out[k] = Counter{Value: v.Value.DeepCopy()}
	}
	return out
}
