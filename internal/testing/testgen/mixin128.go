package testgen

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

// MixinPool128 is a node's pool in mixin form at KEP-5234's limits where
// resource.k8s.io/v1's are tighter: a slice of 32 counter sets (v1: 8 per
// slice) that include one counter set mixin, and a slice of 128 devices
// (v1: 64 when they consume counters), each taking a device mixin's
// attributes and consuming from two counter sets through a consumption
// mixin. Both slices pass admission with mixins; flattened as they are,
// neither passes v1's.
func MixinPool128(driver, pool, node string) []*api.ResourceSlice {
	meta := func(name string) *api.ResourceSlice {
		s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{
			Driver:   driver,
			Pool:     api.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 2},
			NodeName: ptr.To(node),
		}}
		s.APIVersion, s.Kind, s.Name = api.APIVersion, api.KindSlice, name
		return s
	}
	counters := map[string]api.Counter{}
	for i := range 8 {
		counters[fmt.Sprintf("slot-%d", i)] = api.Counter{Value: resource.MustParse("1")}
	}
	sets := meta(pool + "-counters")
	sets.Spec.Mixins = &api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{{Name: "board", Counters: counters}}}
	for i := range 32 {
		sets.Spec.SharedCounters = append(sets.Spec.SharedCounters, api.CounterSet{Name: fmt.Sprintf("board-%d", i), Includes: []string{"board"}})
	}
	devs := meta(pool + "-devices")
	devs.Spec.Mixins = &api.ResourceSliceMixins{
		Device: []api.DeviceMixin{{Name: "model", Attributes: map[api.QualifiedName]api.DeviceAttribute{
			"model":  {StringValue: ptr.To("accelerator-x")},
			"family": {StringValue: ptr.To("x")},
		}}},
		DeviceCounterConsumption: []api.DeviceCounterConsumptionMixin{{Name: "one-slot", Counters: map[string]api.Counter{"slot-0": {Value: resource.MustParse("1")}}}},
	}
	for i := range 128 {
		devs.Spec.Devices = append(devs.Spec.Devices, api.Device{
			Name:       fmt.Sprintf("dev-%d", i),
			Includes:   []string{"model"},
			Attributes: map[api.QualifiedName]api.DeviceAttribute{"index": {IntValue: ptr.To(int64(i))}},
			ConsumesCounters: []api.DeviceCounterConsumption{
				{CounterSet: fmt.Sprintf("board-%d", i%32), Includes: []string{"one-slot"}},
				{CounterSet: fmt.Sprintf("board-%d", (i+1)%32), Includes: []string{"one-slot"}},
			},
		})
	}
	return []*api.ResourceSlice{sets, devs}
}
