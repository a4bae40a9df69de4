package gen

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/api"
)

// Profile is a MIG-like partition shape of an H100-like GPU with 7 compute
// units, 80 memory units and 8 memory slices.
type Profile struct {
	Name    string
	Compute int
	Memory  int
	Slices  int   // memory slices used
	Starts  []int // placements: first memory slice
}

// Profiles are the 18 placements of an H100 (7+4+3+2+1+1).
var Profiles = []Profile{
	{"1g.10gb", 1, 10, 1, []int{0, 1, 2, 3, 4, 5, 6}},
	{"1g.20gb", 1, 20, 2, []int{0, 2, 4, 6}},
	{"2g.20gb", 2, 20, 2, []int{0, 2, 4}},
	{"3g.40gb", 3, 40, 4, []int{0, 4}},
	{"4g.40gb", 4, 40, 4, []int{0}},
	{"7g.80gb", 7, 80, 8, []int{0}},
}

// GPUCounterSet is the counter set name of GPU i of a pool.
func GPUCounterSet(i int) string { return fmt.Sprintf("gpu-%d-cs", i) }

func gpuCounters() map[string]api.Counter {
	kv := []any{"compute", 7, "memory", 80}
	for s := 0; s < 8; s++ {
		kv = append(kv, fmt.Sprintf("mem-slice-%d", s), 1)
	}
	return counters(kv...)
}

// MIGPool builds a node-local pool "gpu-<node>" of nGPU GPUs: one slice
// with the counter sets and nSlices slices with the devices (each full GPU
// followed by its MIG placements of the given profiles, in GPU order).
// With mixins, the same devices are written with device, consumption and
// counter-set mixins. model overrides nothing unless set.
func MIGPool(node string, nGPU int, profiles []Profile, nSlices int, mixins bool) []*api.ResourceSlice {
	pool := "gpu-" + node
	count := int64(nSlices + 1)
	cs := Slice(pool+"-counters", GPUDriver, pool, count)
	cs.Spec.NodeName = ptr.To(node)
	if mixins {
		cs.Spec.Mixins = &api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{{Name: "h100", Counters: gpuCounters()}}}
	}
	for i := 0; i < nGPU; i++ {
		set := api.CounterSet{Name: GPUCounterSet(i)}
		if mixins {
			set.Includes = []string{"h100"}
		} else {
			set.Counters = gpuCounters()
		}
		cs.Spec.SharedCounters = append(cs.Spec.SharedCounters, set)
	}

	var devices []api.Device
	for i := 0; i < nGPU; i++ {
		parent := fmt.Sprintf("%s-gpu-%d", node, i)
		full := api.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[api.QualifiedName]api.DeviceAttribute{
				"type": sattr("gpu"), "profile": sattr("full"), "parent": sattr(parent), "index": iattr(i), "model": sattr("H100"),
			},
			Capacity:         map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q("80Gi")}},
			ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: GPUCounterSet(i), Counters: gpuCounters()}},
		}
		devices = append(devices, full)
		for _, p := range profiles {
			for _, start := range p.Starts {
				d := api.Device{
					Name:       fmt.Sprintf("gpu-%d-mig-%s-%d", i, p.Name, start),
					Attributes: map[api.QualifiedName]api.DeviceAttribute{"parent": sattr(parent), "index": iattr(i), "model": sattr("H100")},
				}
				kv := []any{}
				for s := start; s < start+p.Slices && s < 8; s++ {
					kv = append(kv, fmt.Sprintf("mem-slice-%d", s), 1)
				}
				cons := api.DeviceCounterConsumption{CounterSet: GPUCounterSet(i), Counters: counters(kv...)}
				if mixins {
					d.Includes = []string{"mig", "profile-" + p.Name}
					cons.Includes = []string{"cons-" + p.Name}
				} else {
					d.Attributes["type"] = sattr("mig")
					d.Attributes["profile"] = sattr(p.Name)
					d.Capacity = map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: *resource.NewQuantity(int64(p.Memory)<<30, resource.BinarySI)}}
					for k, v := range counters("compute", p.Compute, "memory", p.Memory) {
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
				m.Device = append(m.Device, api.DeviceMixin{
					Name:       "profile-" + p.Name,
					Attributes: map[api.QualifiedName]api.DeviceAttribute{"profile": sattr(p.Name)},
					Capacity:   map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: *resource.NewQuantity(int64(p.Memory)<<30, resource.BinarySI)}},
				})
				m.DeviceCounterConsumption = append(m.DeviceCounterConsumption, api.DeviceCounterConsumptionMixin{
					Name: "cons-" + p.Name, Counters: counters("compute", p.Compute, "memory", p.Memory),
				})
			}
			s.Spec.Mixins = m
		}
		out = append(out, s)
	}
	return out
}
