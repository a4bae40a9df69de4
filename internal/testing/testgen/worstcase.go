package testgen

import (
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
)

// The largest ResourceSlices that admission allows, built from the limits
// in pkg/core/validation: every count at its limit and every bounded string at
// its longest. Fields that no per-slice limit bounds (labels,
// annotations, node selectors, quantities) are left small: only the
// request body bounds them, and StoredSize's warning is there for them.

// Entries says what the attributes and capacities of the worst cases
// are.
type Entries int

const (
	// StringAttributes: every entry a string attribute of the longest
	// value, which is how KEP-4815 and KEP-5234 size their worst case.
	StringAttributes Entries = iota
	// PolicyCapacities: every entry a capacity with a request policy of
	// the most valid values (KEP-5075), each written as long as an int64
	// can be. Admission bounds neither how many digits a quantity has
	// nor, apart from the per-device count, these entries.
	PolicyCapacities
)

func (e Entries) attributes(from, n int) map[api.QualifiedName]api.DeviceAttribute {
	if e != StringAttributes {
		return nil
	}
	return attributes(from, n)
}

func (e Entries) capacities(from, n int) map[api.QualifiedName]api.DeviceCapacity {
	if e != PolicyCapacities {
		return nil
	}
	return capacities(from, n)
}

// name returns a string of n characters that is a DNS label, unique by i.
func name(prefix string, i, n int) string {
	s := fmt.Sprintf("%s%d-", prefix, i)
	return s + strings.Repeat("x", n-len(s))
}

// qualified is a qualified name at its longest: a 63-character domain and
// a 32-character identifier.
func qualified(i int) api.QualifiedName {
	domain := strings.Repeat("d", validation.QualifiedNameMaxDomainLength-len(".example.com")) + ".example.com"
	id := fmt.Sprintf("a%d_", i)
	return api.QualifiedName(domain + "/" + id + strings.Repeat("x", validation.QualifiedNameMaxIDLength-len(id)))
}

// bigQuantity is the longest whole number an int64 holds.
var bigQuantity = resource.MustParse("9223372036854775807")

func attributes(from, n int) map[api.QualifiedName]api.DeviceAttribute {
	out := make(map[api.QualifiedName]api.DeviceAttribute, n)
	for i := from; i < from+n; i++ {
		out[qualified(i)] = api.DeviceAttribute{StringValue: ptr.To(strings.Repeat("v", validation.AttributeValueMaxLength))}
	}
	return out
}

// capacities are consumable capacities at their largest: the value and a
// request policy with a default and the most valid values, all as long as
// an int64 writes them.
func capacities(from, n int) map[api.QualifiedName]api.DeviceCapacity {
	values := make([]resource.Quantity, validation.MaxCapacityRequestPolicyValidValues)
	for i := range values {
		values[i] = resource.MustParse(fmt.Sprint(int64(1<<63-1) - int64(len(values)-1-i)))
	}
	out := make(map[api.QualifiedName]api.DeviceCapacity, n)
	for i := from; i < from+n; i++ {
		out[qualified(i)] = api.DeviceCapacity{Value: bigQuantity, RequestPolicy: &resourcev1.CapacityRequestPolicy{
			Default: ptr.To(values[0]), ValidValues: values}}
	}
	return out
}

func counterMap(n int) map[string]api.Counter {
	out := make(map[string]api.Counter, n)
	for i := range n {
		out[name("c", i, 63)] = api.Counter{Value: bigQuantity}
	}
	return out
}

func conditions(prefix string) []string {
	out := make([]string, validation.MaxBindingConditions)
	for i := range out {
		out[i] = string(qualified(i))[:len(qualified(i))-len(prefix)] + prefix
	}
	return out
}

func taints(n int) []api.DeviceTaint {
	out := make([]api.DeviceTaint, n)
	for i := range out {
		out[i] = api.DeviceTaint{Key: string(qualified(i)), Value: strings.Repeat("t", 63), Effect: "NoExecute"}
	}
	return out
}

func worstMeta(slice string) *api.ResourceSlice {
	s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{
		Driver:   strings.Repeat("d", validation.DriverNameMaxLength-len(".example.com")) + ".example.com",
		Pool:     api.ResourcePool{Name: strings.Repeat("p", validation.PoolNameMaxLength), Generation: 1 << 62, ResourceSliceCount: 1 << 62},
		NodeName: ptr.To(strings.Repeat("n", 253)),
	}}
	s.APIVersion, s.Kind = api.APIVersion, api.KindSlice
	s.Name = slice + "-" + strings.Repeat("s", 253-len(slice)-1)
	return s
}

// worstDevice is a device with every bounded field at its limit: names,
// attributes or capacities (see Entries), binding
// conditions, and the given taints and counter consumptions.
func worstDevice(entries Entries, i, attrs, nTaints, consumptions, countersEach int, set func(j int) string) api.Device {
	d := api.Device{
		Name:                     name("device", i, 63),
		Attributes:               entries.attributes(0, attrs),
		Capacity:                 entries.capacities(0, attrs),
		BindsToNode:              ptr.To(true),
		BindingConditions:        conditions("ready"),
		BindingFailureConditions: conditions("failed"),
		AllowMultipleAllocations: ptr.To(true),
		Taints:                   taints(nTaints),
	}
	for j := range consumptions {
		d.ConsumesCounters = append(d.ConsumesCounters, api.DeviceCounterConsumption{CounterSet: set(j), Counters: counterMap(countersEach)})
	}
	return d
}

// WorstCaseFlat returns the largest plain resource.k8s.io/v1 slices: 128
// devices without counters or taints; 64 devices with the most taints
// and, within the slice-wide 2048, the most consumed counters; and the
// largest counter set slice.
func WorstCaseFlat(entries Entries) map[string]*api.ResourceSlice {
	out := map[string]*api.ResourceSlice{}
	plain := worstMeta("plain")
	for i := range validation.MaxDevices {
		plain.Spec.Devices = append(plain.Spec.Devices, worstDevice(entries, i, validation.MaxAttributesAndCapacitiesPerDevice, 0, 0, 0, nil))
	}
	out["devices"] = plain

	adv := worstMeta("advanced")
	perDevice := validation.MaxConsumedCountersPerSlice / validation.MaxDevicesWithAdvancedFeatures
	for i := range validation.MaxDevicesWithAdvancedFeatures {
		adv.Spec.Devices = append(adv.Spec.Devices, worstDevice(entries, i, validation.MaxAttributesAndCapacitiesPerDevice, validation.MaxTaintsPerDevice,
			validation.MaxConsumptionsPerDevice, perDevice/validation.MaxConsumptionsPerDevice, func(j int) string { return name("set", j, 63) }))
	}
	out["devices with counters and taints"] = adv

	sets := worstMeta("counters")
	for i := range validation.MaxCounterSets {
		sets.Spec.SharedCounters = append(sets.Spec.SharedCounters, api.CounterSet{Name: name("set", i, 63), Counters: counterMap(validation.MaxCountersPerCounterSet)})
	}
	out["counter sets"] = sets
	return out
}

// WorstCaseMixin returns the largest slices in mixin form (KEP-5234
// "Limits"): 128 devices with the most taints, consumptions and includes,
// the slice's 4096 attributes spread over devices and device mixins, its
// 2048 consumed counters over consumptions and consumption mixins, and
// every mixin list at its limit; and the largest counter set slice.
func WorstCaseMixin(entries Entries) map[string]*api.ResourceSlice {
	out := map[string]*api.ResourceSlice{}
	s := worstMeta("mixin")
	m := &api.ResourceSliceMixins{}
	// Half the attributes on the devices, half in the mixins: each device
	// includes one mixin of 16 and has 16 of its own, 32 when flattened.
	half := validation.MixinMaxAttributesAndCapacitiesPerSlice / 2 / validation.MaxDeviceMixins
	for i := range validation.MaxDeviceMixins {
		m.Device = append(m.Device, api.DeviceMixin{Name: name("mixin", i, 63), Attributes: entries.attributes(half, half), Capacity: entries.capacities(half, half)})
	}
	// Consumed counters: every consumption mixin and every device's
	// consumptions share the 2048.
	perMixin := validation.MixinMaxConsumedCountersPerSlice / 2 / validation.MaxConsumptionMixins
	for i := range validation.MaxConsumptionMixins {
		m.DeviceCounterConsumption = append(m.DeviceCounterConsumption, api.DeviceCounterConsumptionMixin{Name: name("consume", i, 63), Counters: counterMap(perMixin)})
	}
	perDevice := validation.MixinMaxConsumedCountersPerSlice / 2 / validation.MixinMaxDevices / validation.MixinMaxConsumptionsPerDevice
	for i := range validation.MixinMaxDevices {
		d := worstDevice(entries, i, half, validation.MixinMaxTaintsPerDevice, validation.MixinMaxConsumptionsPerDevice, perDevice,
			func(j int) string { return name("set", j, 63) })
		for k := range validation.MaxDeviceIncludes {
			d.Includes = append(d.Includes, m.Device[(i+k)%len(m.Device)].Name)
		}
		for j := range d.ConsumesCounters {
			for k := range validation.MaxConsumptionIncludes {
				d.ConsumesCounters[j].Includes = append(d.ConsumesCounters[j].Includes, m.DeviceCounterConsumption[(i+j+k)%len(m.DeviceCounterConsumption)].Name)
			}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	s.Spec.Mixins = m
	out["devices"] = s

	sets := worstMeta("mixin-counters")
	sm := &api.ResourceSliceMixins{}
	perSetMixin := validation.MixinMaxCountersPerSlice / 2 / validation.MaxCounterSetMixins
	for i := range validation.MaxCounterSetMixins {
		sm.CounterSet = append(sm.CounterSet, api.CounterSetMixin{Name: name("board", i, 63), Counters: counterMap(perSetMixin)})
	}
	perSet := validation.MixinMaxCountersPerSlice / 2 / validation.MixinMaxCounterSets
	for i := range validation.MixinMaxCounterSets {
		cs := api.CounterSet{Name: name("set", i, 63), Counters: counterMap(perSet)}
		for k := range validation.MaxCounterSetIncludes {
			cs.Includes = append(cs.Includes, sm.CounterSet[(i+k)%len(sm.CounterSet)].Name)
		}
		sets.Spec.SharedCounters = append(sets.Spec.SharedCounters, cs)
	}
	sets.Spec.Mixins = sm
	out["counter sets"] = sets
	return out
}
