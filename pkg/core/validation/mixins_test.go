package validation

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

// mixinSlice is a valid device slice in KEP-5234 form: a full GPU and two
// MIG partitions share attributes, capacity and consumption patterns.
func mixinSlice() *api.ResourceSlice {
	mig := func(name string, index int64) api.Device {
		return api.Device{
			Name:       name,
			Includes:   []string{"a100", "mig-1g"},
			Attributes: map[api.QualifiedName]api.DeviceAttribute{"index": intAttr(index)},
			ConsumesCounters: []api.DeviceCounterConsumption{{
				CounterSet: "gpu-0-counters",
				Includes:   []string{"mig-1g"},
				Counters:   map[string]api.Counter{fmt.Sprintf("slice%d", index): {Value: q("1")}},
			}},
		}
	}
	return &api.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpus"},
		Spec: api.ResourceSliceSpec{
			Driver:   driver,
			Pool:     api.ResourcePool{Name: "node-1", Generation: 3, ResourceSliceCount: 2},
			NodeName: ptr.To("node-1"),
			Mixins: &api.ResourceSliceMixins{
				Device: []api.DeviceMixin{
					{Name: "a100", Attributes: map[api.QualifiedName]api.DeviceAttribute{
						"model": strAttr("a100"), "gpu.example.com/profile": strAttr("full")},
						Capacity: map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q("40Gi")}}},
					{Name: "mig-1g", Attributes: map[api.QualifiedName]api.DeviceAttribute{"gpu.example.com/profile": strAttr("1g.5gb")},
						Capacity: map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q("5Gi")}}},
				},
				DeviceCounterConsumption: []api.DeviceCounterConsumptionMixin{
					{Name: "full", Counters: map[string]api.Counter{"memory": {Value: q("40Gi")}, "sm": {Value: q("98")}}},
					{Name: "mig-1g", Counters: map[string]api.Counter{"memory": {Value: q("5Gi")}, "sm": {Value: q("14")}}},
				},
			},
			Devices: []api.Device{
				{
					Name:             "gpu-0",
					Includes:         []string{"a100"},
					Attributes:       map[api.QualifiedName]api.DeviceAttribute{"index": intAttr(0)},
					ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "gpu-0-counters", Includes: []string{"full"}}},
				},
				mig("gpu-0-mig-0", 0),
				mig("gpu-0-mig-1", 1),
			},
			PartitionTypeAttribute: ptr.To(api.FullyQualifiedName("gpu.example.com/profile")),
		},
	}
}

// mixinCounterSlice is a valid counter-set slice in KEP-5234 form.
func mixinCounterSlice() *api.ResourceSlice {
	return &api.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-counters"},
		Spec: api.ResourceSliceSpec{
			Driver:   driver,
			Pool:     api.ResourcePool{Name: "node-1", Generation: 3, ResourceSliceCount: 2},
			NodeName: ptr.To("node-1"),
			Mixins: &api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{
				{Name: "a100", Counters: map[string]api.Counter{"memory": {Value: q("40Gi")}, "sm": {Value: q("98")}}},
			}},
			SharedCounters: []api.CounterSet{
				{Name: "gpu-0-counters", Includes: []string{"a100"}},
				{Name: "gpu-1-counters", Includes: []string{"a100"}, Counters: map[string]api.Counter{"slice0": {Value: q("1")}}},
			},
		},
	}
}

// mixinDevices returns n devices that each include the a100 mixin.
func mixinDevices(n int) []api.Device {
	out := make([]api.Device, n)
	for i := range out {
		out[i] = api.Device{Name: fmt.Sprintf("dev-%d", i), Includes: []string{"a100"}}
	}
	return out
}

func TestResourceSliceMixins(t *testing.T) {
	cases := []sliceCase{
		{name: "valid device slice with mixins"},
		{name: "valid counter slice with mixins", base: mixinCounterSlice},
		{name: "empty mixins still select the mixin limits", base: plainSlice, mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins = &api.ResourceSliceMixins{}
			s.Spec.Devices[0].Taints = make([]api.DeviceTaint, 5)
		}, want: []want{eTooMany(d0 + ".taints")}},
		// includes
		{name: "unknown device include", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[2].Includes[1] = "mig-2g" },
			want: []want{eNotFound("spec.devices[2].includes[1]")}},
		{name: "device includes a consumption mixin", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Includes = []string{"full"} },
			want: []want{eNotFound("spec.devices[0].includes[0]")}},
		{name: "empty include", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Includes = []string{""} },
			want: []want{eReq("spec.devices[0].includes[0]")}},
		{name: "unknown consumption include", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].ConsumesCounters[0].Includes = []string{"mig-7g"} },
			want: []want{eNotFound(d0 + ".consumesCounters[0].includes[0]")}},
		{name: "unknown counter set include", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) { s.Spec.SharedCounters[1].Includes = []string{"h100"} },
			want: []want{eNotFound("spec.sharedCounters[1].includes[0]")}},
		{name: "includes without any mixins", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins = nil
			s.Spec.PartitionTypeAttribute = nil
			s.Spec.Devices = s.Spec.Devices[:1]
			s.Spec.Devices[0].ConsumesCounters = nil
		}, want: []want{eNotFound(d0 + ".includes[0]")}},
		{name: "9 device includes", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Includes = []string{"a100", "a100", "a100", "a100", "a100", "a100", "a100", "a100", "a100"}
		}, want: []want{eTooMany(d0 + ".includes")}},
		{name: "8 device includes", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Includes = []string{"mig-1g", "a100", "a100", "a100", "a100", "a100", "a100", "a100"}
		}},
		{name: "5 consumption includes", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters[0].Includes = []string{"full", "full", "full", "full", "full"}
		}, want: []want{eTooMany(d0 + ".consumesCounters[0].includes")}},
		{name: "9 counter set includes", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) {
			s.Spec.SharedCounters[0].Includes = []string{"a100", "a100", "a100", "a100", "a100", "a100", "a100", "a100", "a100"}
		}, want: []want{eTooMany("spec.sharedCounters[0].includes")}},
		// flattened per-device limit
		{name: "20 own and 20 mixin attributes exceed 32 when flattened", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.Device[0].Attributes = manyAttrs("m", 20)
			s.Spec.Mixins.Device[0].Attributes["gpu.example.com/profile"] = strAttr("full")
			s.Spec.Devices[0].Attributes = manyAttrs("d", 20)
		}, want: []want{eInv(d0)}},
		{name: "overlapping names are counted once when flattened", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.Device[0].Attributes = manyAttrs("a", 20)
			s.Spec.Mixins.Device[0].Attributes["gpu.example.com/profile"] = strAttr("full")
			s.Spec.Devices[0].Attributes = manyAttrs("a", 25) // 25 + profile + memory = 27
		}},
		// counters may come only from mixins
		{name: "consumption without counters anywhere", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].ConsumesCounters[0].Includes = nil },
			want: []want{eReq(d0 + ".consumesCounters[0].counters")}},
		{name: "counter set without counters anywhere", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) { s.Spec.SharedCounters[0].Includes = nil },
			want: []want{eReq("spec.sharedCounters[0].counters")}},
		// mixin definitions
		{name: "duplicate device mixin", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.Device[1].Name = "a100"
			s.Spec.Devices[1].Includes, s.Spec.Devices[2].Includes = []string{"a100"}, []string{"a100"}
		},
			want: []want{eDup("spec.mixins.device[1]")}},
		{name: "same name in different mixin kinds", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.DeviceCounterConsumption[0].Name = "a100"
			s.Spec.Devices[0].ConsumesCounters[0].Includes = []string{"a100"}
		}},
		{name: "device mixin name invalid", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.Device[1].Name = "MIG"
			s.Spec.Devices[1].Includes = []string{"a100"}
			s.Spec.Devices[2].Includes = []string{"a100"}
		},
			want: []want{eInv("spec.mixins.device[1].name")}},
		{name: "device mixin attribute invalid", mutate: func(s *api.ResourceSlice) { s.Spec.Mixins.Device[0].Attributes["bad name"] = intAttr(1) },
			want: []want{eInv("spec.mixins.device[0].attributes[bad name]")}},
		{name: "device mixin attribute without value", mutate: func(s *api.ResourceSlice) { s.Spec.Mixins.Device[0].Attributes["x"] = api.DeviceAttribute{} },
			want: []want{eInv("spec.mixins.device[0].attributes[x]")}},
		{name: "device mixin request policy invalid", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.Device[1].Capacity["memory"] = api.DeviceCapacity{Value: q("5Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{ValidValues: []resource.Quantity{q("1Gi")}}}
			for i := 1; i < 3; i++ {
				s.Spec.Devices[i].AllowMultipleAllocations = ptr.To(true)
			}
		}, want: []want{eReq("spec.mixins.device[1].capacity[memory].requestPolicy.default")}},
		{name: "mixin request policy on a single-allocation device", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.Device[1].Capacity["memory"] = api.DeviceCapacity{Value: q("5Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: qp("1Gi")}}
			s.Spec.Devices[1].AllowMultipleAllocations = ptr.To(true)
		}, want: []want{eForb("spec.devices[2].includes[1]")}},
		{name: "mixin request policy overridden by the device", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.Device[1].Capacity["memory"] = api.DeviceCapacity{Value: q("5Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: qp("1Gi")}}
			for i := 1; i < 3; i++ {
				s.Spec.Devices[i].Capacity = map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q("5Gi")}}
			}
		}},
		{name: "consumption mixin without counters", mutate: func(s *api.ResourceSlice) { s.Spec.Mixins.DeviceCounterConsumption[1].Counters = nil },
			want: []want{eReq("spec.mixins.deviceCounterConsumption[1].counters")}},
		{name: "consumption mixin counter name invalid", mutate: func(s *api.ResourceSlice) { s.Spec.Mixins.DeviceCounterConsumption[1].Counters["SM"] = api.Counter{} },
			want: []want{eInv("spec.mixins.deviceCounterConsumption[1].counters[SM]")}},
		{name: "duplicate consumption mixin", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.DeviceCounterConsumption[1].Name = "full"
			s.Spec.Devices[1].ConsumesCounters[0].Includes = []string{"full"}
			s.Spec.Devices[2].ConsumesCounters[0].Includes = []string{"full"}
		},
			want: []want{eDup("spec.mixins.deviceCounterConsumption[1]")}},
		{name: "counter set mixin without counters", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.CounterSet = append(s.Spec.Mixins.CounterSet, api.CounterSetMixin{Name: "empty"})
		}, want: []want{eReq("spec.mixins.counterSet[1].counters")}},
		{name: "counter set mixin name missing", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.CounterSet = append(s.Spec.Mixins.CounterSet, api.CounterSetMixin{Counters: manyCounters("c", 1)})
		}, want: []want{eReq("spec.mixins.counterSet[1].name")}},
		{name: "129 device mixins", mutate: func(s *api.ResourceSlice) {
			for i := range 127 {
				s.Spec.Mixins.Device = append(s.Spec.Mixins.Device, api.DeviceMixin{Name: fmt.Sprintf("m%d", i)})
			}
		}, want: []want{eTooMany("spec.mixins.device")}},
		{name: "129 consumption mixins", mutate: func(s *api.ResourceSlice) {
			for i := range 127 {
				s.Spec.Mixins.DeviceCounterConsumption = append(s.Spec.Mixins.DeviceCounterConsumption, api.DeviceCounterConsumptionMixin{Name: fmt.Sprintf("m%d", i), Counters: manyCounters("c", 1)})
			}
		}, want: []want{eTooMany("spec.mixins.deviceCounterConsumption")}},
		{name: "33 counter set mixins", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) {
			for i := range 32 {
				s.Spec.Mixins.CounterSet = append(s.Spec.Mixins.CounterSet, api.CounterSetMixin{Name: fmt.Sprintf("m%d", i), Counters: manyCounters("c", 1)})
			}
		}, want: []want{eTooMany("spec.mixins.counterSet")}},
		// limits that mixins raise or replace
		{name: "32 counter sets with mixins", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) {
			for i := range 30 {
				s.Spec.SharedCounters = append(s.Spec.SharedCounters, api.CounterSet{Name: fmt.Sprintf("set-%d", i), Includes: []string{"a100"}})
			}
		}},
		{name: "33 counter sets with mixins", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) {
			for i := range 31 {
				s.Spec.SharedCounters = append(s.Spec.SharedCounters, api.CounterSet{Name: fmt.Sprintf("set-%d", i), Includes: []string{"a100"}})
			}
		}, want: []want{eTooMany("spec.sharedCounters")}},
		{name: "64 counters in one counter set with mixins", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) {
			s.Spec.SharedCounters[0].Counters = manyCounters("c", 64)
		}},
		{name: "257 counters across sets and mixins", base: mixinCounterSlice, mutate: func(s *api.ResourceSlice) {
			s.Spec.SharedCounters[0].Counters = manyCounters("c", 200)
			s.Spec.Mixins.CounterSet[0].Counters = manyCounters("c", 56) // + slice0 of gpu-1-counters
		}, want: []want{eInv("spec")}},
		{name: "128 devices with taints and counters", mutate: func(s *api.ResourceSlice) {
			s.Spec.PartitionTypeAttribute = nil
			s.Spec.Devices = mixinDevices(128)
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].Taints = []api.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNone}}
				s.Spec.Devices[i].ConsumesCounters = []api.DeviceCounterConsumption{{CounterSet: "c", Includes: []string{"full"}}}
			}
		}},
		{name: "129 devices with mixins", mutate: func(s *api.ResourceSlice) { s.Spec.PartitionTypeAttribute = nil; s.Spec.Devices = mixinDevices(129) },
			want: []want{eTooMany("spec.devices")}},
		{name: "5 taints with mixins", mutate: func(s *api.ResourceSlice) {
			for i := range 5 {
				s.Spec.Devices[0].Taints = append(s.Spec.Devices[0].Taints, api.DeviceTaint{Key: fmt.Sprintf("k%d", i), Effect: resourcev1.DeviceTaintEffectNone})
			}
		}, want: []want{eTooMany(d0 + ".taints")}},
		{name: "4 consumptions with mixins", mutate: func(s *api.ResourceSlice) {
			for _, set := range []string{"b", "c", "d"} {
				s.Spec.Devices[0].ConsumesCounters = append(s.Spec.Devices[0].ConsumesCounters, api.DeviceCounterConsumption{CounterSet: set, Includes: []string{"full"}})
			}
		}},
		{name: "5 consumptions with mixins", mutate: func(s *api.ResourceSlice) {
			for _, set := range []string{"b", "c", "d", "e"} {
				s.Spec.Devices[0].ConsumesCounters = append(s.Spec.Devices[0].ConsumesCounters, api.DeviceCounterConsumption{CounterSet: set, Includes: []string{"full"}})
			}
		}, want: []want{eTooMany(d0 + ".consumesCounters")}},
		{name: "40 counters in one consumption with mixins", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].ConsumesCounters[0].Counters = manyCounters("c", 40) }},
		{name: "2049 consumed counters across consumptions and mixins", mutate: func(s *api.ResourceSlice) {
			s.Spec.Mixins.DeviceCounterConsumption[0].Counters = manyCounters("c", 2000)
			s.Spec.Devices[0].ConsumesCounters[0].Counters = manyCounters("c", 45) // + 2 in mig-1g + 1 per MIG device
		}, want: []want{eInv("spec")}},
		{name: "4097 attributes and capacities across devices and mixins", mutate: func(s *api.ResourceSlice) {
			s.Spec.PartitionTypeAttribute = nil
			s.Spec.Mixins.Device = []api.DeviceMixin{{Name: "a100", Attributes: manyAttrs("m", 1)}}
			s.Spec.Devices = mixinDevices(128)
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].Includes = nil
				s.Spec.Devices[i].Attributes = manyAttrs("a", 32)
			}
		}, want: []want{eInv("spec")}},
		// flattened lookups
		{name: "partitionTypeAttribute missing on the flattened device", mutate: func(s *api.ResourceSlice) {
			delete(s.Spec.Mixins.Device[0].Attributes, "gpu.example.com/profile")
		}, want: []want{eReq("spec.devices[0].attributes[gpu.example.com/profile]")}},
		{name: "nodeAllocatableResources capacityKey from a mixin", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
				"memory": {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To[api.QualifiedName]("memory"), CapacityMultiplier: qp("1")}}}
		}},
	}
	runSliceCases(t, mixinSlice, cases)
}
