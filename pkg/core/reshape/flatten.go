package reshape

import (
	"fmt"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
)

// ForV1 flattens s and splits the result with Split. It fails only when
// an include names no mixin.
func ForV1(s *api.ResourceSlice) ([]*api.ResourceSlice, error) {
	f, err := api.Flatten(s)
	if err != nil {
		return nil, err
	}
	return Split(f), nil
}

// Split cuts a slice without mixins into slices that fit the v1
// per-slice limits: counter sets apart from devices (KEP-4815 "Limits"),
// at most MaxCounterSets counter sets, and at most
// MaxDevicesWithAdvancedFeatures devices (MaxDevices when none consumes
// counters or has taints) and MaxConsumedCountersPerSlice consumed
// counters per slice. Order is kept: devices are the allocator's
// first-fit order. A slice that fits is returned alone, named as it was;
// the pieces of one that does not are named "<name>-<i>", which depends on
// nothing but the slice, so republishing it names them the same.
//
// What no cut can fix (a device with more counter consumptions, or a
// counter set with more counters, than v1 allows) stays in one piece for
// v1 admission to report. The pieces declare the input's
// resourceSliceCount; see Count for the pool's.
func Split(s *api.ResourceSlice) []*api.ResourceSlice {
	var out []*api.ResourceSlice
	part := func(devices []api.Device, sets []api.CounterSet) {
		c := s.DeepCopy()
		c.Spec.Devices, c.Spec.SharedCounters = devices, sets
		out = append(out, c)
	}
	for i := 0; i < len(s.Spec.SharedCounters); i += validation.MaxCounterSets {
		part(nil, s.Spec.SharedCounters[i:min(i+validation.MaxCounterSets, len(s.Spec.SharedCounters))])
	}
	devs := s.Spec.Devices
	for len(devs) > 0 {
		n, consumed, advanced := 0, 0, false
		for n < len(devs) {
			d := &devs[n]
			c := 0
			for _, cc := range d.ConsumesCounters {
				c += len(cc.Counters)
			}
			adv := advanced || len(d.ConsumesCounters) > 0 || len(d.Taints) > 0
			limit := validation.MaxDevices
			if adv {
				limit = validation.MaxDevicesWithAdvancedFeatures
			}
			if n+1 > limit || consumed+c > validation.MaxConsumedCountersPerSlice {
				break
			}
			n, consumed, advanced = n+1, consumed+c, adv
		}
		n = max(n, 1) // a device that alone breaks a limit fails validation
		part(devs[:n], nil)
		devs = devs[n:]
	}
	if len(out) == 0 {
		part(nil, nil) // an empty pool still says the driver is there
	}
	if len(out) > 1 {
		for i, c := range out {
			c.Name = fmt.Sprintf("%s-%d", s.Name, i)
		}
	}
	return out
}

// PoolKey is one generation of one pool.
type PoolKey struct {
	Driver, Pool string
	Generation   int64
}

// KeyOf returns the generation of the pool s belongs to.
func KeyOf(s *api.ResourceSlice) PoolKey {
	return PoolKey{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Generation: s.Spec.Pool.Generation}
}

// Count returns, per pool generation, the resourceSliceCount its slices
// must declare once split: what they declared (the largest, when they
// disagree) plus every extra piece Split made of them. pieces[i] are the
// pieces of in[i]. A pool is complete again only if all its slices were
// split together.
func Count(in []*api.ResourceSlice, pieces [][]*api.ResourceSlice) map[PoolKey]int64 {
	out := map[PoolKey]int64{}
	extra := map[PoolKey]int64{}
	for i, s := range in {
		k := KeyOf(s)
		out[k] = max(out[k], s.Spec.Pool.ResourceSliceCount)
		extra[k] += int64(len(pieces[i]) - 1)
	}
	for k := range out {
		out[k] += extra[k]
	}
	return out
}
