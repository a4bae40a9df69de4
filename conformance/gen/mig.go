package gen

import (
	"fmt"

	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/mig"
)

// Profiles are the MIG profiles of an H100 80GB, smallest first: 18
// placements (7+4+3+2+1+1).
var Profiles = mig.H100.SmallestFirst()

// GPUCounterSet is the counter set name of GPU i of a pool.
func GPUCounterSet(i int) string { return mig.CounterSetName(i) }

// MIGPool builds a node-local pool "gpu-<node>" of nGPU H100s: one slice
// with the counter sets and nSlices slices with the devices (each full GPU
// followed by its MIG placements of the given profiles, in GPU order).
// With mixins, the same devices are written with device, consumption and
// counter-set mixins.
func MIGPool(node string, nGPU int, profiles []*mig.Profile, nSlices int, mixins bool) []*api.ResourceSlice {
	model := &mig.H100
	pool := "gpu-" + node
	count := int64(nSlices + 1)
	cs := Slice(pool+"-counters", GPUDriver, pool, count)
	cs.Spec.NodeName = ptr.To(node)
	if mixins {
		cs.Spec.Mixins = &api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{{Name: "h100", Counters: model.SharedCounters()}}}
	}
	for i := 0; i < nGPU; i++ {
		set := api.CounterSet{Name: GPUCounterSet(i)}
		if mixins {
			set.Includes = []string{"h100"}
		} else {
			set.Counters = model.SharedCounters()
		}
		cs.Spec.SharedCounters = append(cs.Spec.SharedCounters, set)
	}

	var devices []api.Device
	for i := 0; i < nGPU; i++ {
		parent := fmt.Sprintf("%s-gpu-%d", node, i)
		full := api.Device{
			Name: mig.GPUDeviceName(i),
			Attributes: map[api.QualifiedName]api.DeviceAttribute{
				"type": sattr("gpu"), "profile": sattr("full"), "parent": sattr(parent), "index": iattr(i), "model": sattr("H100"),
			},
			Capacity:         map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q(model.Whole.Memory)}},
			ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: GPUCounterSet(i), Counters: model.SharedCounters()}},
		}
		devices = append(devices, full)
		for _, p := range profiles {
			for _, start := range p.Placements {
				d := api.Device{
					Name:       mig.MIGDeviceName(i, p.Name, start),
					Attributes: map[api.QualifiedName]api.DeviceAttribute{"parent": sattr(parent), "index": iattr(i), "model": sattr("H100")},
				}
				cons := api.DeviceCounterConsumption{CounterSet: GPUCounterSet(i), Counters: map[string]api.Counter{}}
				for s := start; s < start+p.MemorySlices; s++ {
					cons.Counters[mig.MemorySliceCounter(s)] = api.Counter{Value: q("1")}
				}
				label := mig.ProfileLabel(p.Name)
				if mixins {
					d.Includes = []string{"mig", "profile-" + label}
					cons.Includes = []string{"cons-" + label}
				} else {
					d.Attributes["type"] = sattr("mig")
					d.Attributes["profile"] = sattr(p.Name)
					d.Capacity = map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q(p.Memory)}}
					for k, v := range p.Counters() {
						cons.Counters[k] = v
					}
				}
				d.ConsumesCounters = []api.DeviceCounterConsumption{cons}
				devices = append(devices, d)
			}
		}
	}
	out := []*api.ResourceSlice{cs}
	for j := 0; j < nSlices; j++ {
		lo, hi := j*len(devices)/nSlices, (j+1)*len(devices)/nSlices
		s := Slice(fmt.Sprintf("%s-%d", pool, j), GPUDriver, pool, count)
		s.Spec.NodeName = ptr.To(node)
		s.Spec.Devices = append([]api.Device(nil), devices[lo:hi]...)
		if mixins {
			m := &api.ResourceSliceMixins{Device: []api.DeviceMixin{{Name: "mig", Attributes: map[api.QualifiedName]api.DeviceAttribute{
				"type": sattr("mig"), "model": sattr("A100"), // the device's own model wins
			}}}}
			for _, p := range profiles {
				label := mig.ProfileLabel(p.Name)
				m.Device = append(m.Device, api.DeviceMixin{
					Name:       "profile-" + label,
					Attributes: map[api.QualifiedName]api.DeviceAttribute{"profile": sattr(p.Name)},
					Capacity:   map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q(p.Memory)}},
				})
				m.DeviceCounterConsumption = append(m.DeviceCounterConsumption, api.DeviceCounterConsumptionMixin{
					Name: "cons-" + label, Counters: p.Counters(),
				})
			}
			s.Spec.Mixins = m
		}
		out = append(out, s)
	}
	return out
}
