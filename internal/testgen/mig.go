package testgen

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/api"
)

// MIGProfile is one row of the MIG profile table of seed 001 ("Dynamic
// allocation of Multi-Instance GPUs"). Placements is how many instances
// fit side by side on the memory slices of one GPU.
type MIGProfile struct {
	Name            string
	Memory          string
	MemorySlices    int
	Multiprocessors int64
	CopyEngines     int64
	Decoders        int64
	Encoders        int64
	JPEGEngines     int64
	OFAEngines      int64
	Placements      int
}

// A100Profiles is the A100 40GB table of seed 001 without the "+me"
// variant, which the NVIDIA driver does not publish by default. With the
// whole-GPU device that gives 19 devices per GPU.
var A100Profiles = []MIGProfile{
	{"7g.40gb", "40192Mi", 8, 98, 7, 5, 0, 1, 1, 1},
	{"4g.20gb", "19968Mi", 4, 56, 4, 2, 0, 0, 0, 1},
	{"3g.20gb", "19968Mi", 4, 42, 3, 2, 0, 0, 0, 2},
	{"2g.10gb", "9856Mi", 2, 28, 2, 1, 0, 0, 0, 3},
	{"1g.10gb", "9856Mi", 2, 14, 1, 1, 0, 0, 0, 4},
	{"1g.5gb", "4864Mi", 1, 14, 1, 0, 0, 0, 0, 7},
}

// A100MediaProfile is the "+me" row, for tests that want all 25 partitions.
var A100MediaProfile = MIGProfile{"1g.5gb+me", "4864Mi", 1, 14, 1, 1, 0, 1, 1, 7}

// H100Profiles is the H100 80GB table in the same shape.
var H100Profiles = []MIGProfile{
	{"7g.80gb", "81152Mi", 8, 132, 8, 7, 0, 7, 1, 1},
	{"4g.40gb", "40448Mi", 4, 64, 4, 4, 0, 4, 0, 1},
	{"3g.40gb", "40448Mi", 4, 60, 3, 3, 0, 3, 0, 2},
	{"2g.20gb", "20096Mi", 2, 32, 2, 2, 0, 2, 0, 3},
	{"1g.20gb", "20096Mi", 2, 16, 1, 1, 0, 1, 0, 4},
	{"1g.10gb", "9856Mi", 1, 16, 1, 1, 0, 1, 0, 7},
}

// MIGSpec describes the GPUs of one node.
type MIGSpec struct {
	Driver, Pool, Node string
	GPUs               int
	Product            string
	Architecture       string
	ComputeCapability  string // a semantic version, e.g. "8.0.0"
	DriverVersion      string // a semantic version
	Profiles           []MIGProfile
	// Whole is the profile of the whole-GPU device and the content of the
	// GPU's counter set.
	Whole MIGProfile
	// Combined puts each GPU's counter set into the slice of its devices,
	// the single-slice shape of the KEP examples.
	Combined bool
	// GPUsPerSlice bounds how many GPUs share a device slice; the default
	// keeps each slice at most 64 devices.
	GPUsPerSlice int
}

// A100 is a node with n A100 40GB GPUs.
func A100(n int) MIGSpec {
	return MIGSpec{
		Driver: "gpu.nvidia.com", Pool: "node-a100", Node: "node-a100", GPUs: n,
		Product: "NVIDIA A100-SXM4-40GB", Architecture: "Ampere",
		ComputeCapability: "8.0.0", DriverVersion: "550.54.15",
		Profiles: A100Profiles,
		Whole:    MIGProfile{"gpu", "40Gi", 8, 98, 7, 5, 0, 1, 1, 1},
	}
}

// H100 is a node with n H100 80GB GPUs.
func H100(n int) MIGSpec {
	return MIGSpec{
		Driver: "gpu.nvidia.com", Pool: "node-h100", Node: "node-h100", GPUs: n,
		Product: "NVIDIA H100 80GB HBM3", Architecture: "Hopper",
		ComputeCapability: "9.0.0", DriverVersion: "550.54.15",
		Profiles: H100Profiles,
		Whole:    MIGProfile{"gpu", "80Gi", 8, 132, 8, 7, 0, 7, 1, 1},
	}
}

// DevicesPerGPU is the number of devices MIG publishes for each GPU.
func (m MIGSpec) DevicesPerGPU() int {
	n := 1
	for _, p := range m.Profiles {
		n += p.Placements
	}
	return n
}

// MIG returns the slices of one node's MIG pool, flat (without mixins), in
// the shape of the NVIDIA driver: a counter set per GPU with all its
// engines, memory and memory slices, and for each GPU a whole-GPU device
// plus one device per profile placement, each consuming exactly what its
// capacities say. Without Combined the first slice holds all counter sets
// (KEP-4815); the device slices follow.
func MIG(m MIGSpec) []*api.ResourceSlice {
	perSlice := m.GPUsPerSlice
	if perSlice <= 0 {
		perSlice = max(1, maxDevicesWithCounters/max(1, m.DevicesPerGPU()))
	}
	if m.Combined {
		perSlice = 1
	}
	var out []*api.ResourceSlice
	newSlice := func(name string) *api.ResourceSlice {
		s := &api.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: api.ResourceSliceSpec{
				Driver:   m.Driver,
				Pool:     api.ResourcePool{Name: m.Pool, Generation: 1},
				NodeName: ptr.To(m.Node),
			},
		}
		out = append(out, s)
		return s
	}
	var counters *api.ResourceSlice
	if !m.Combined {
		counters = newSlice(m.Pool + "-counters")
	}
	var cur *api.ResourceSlice
	for gpu := range m.GPUs {
		if gpu%perSlice == 0 {
			cur = newSlice(fmt.Sprintf("%s-gpus-%d", m.Pool, gpu))
		}
		cs := api.CounterSet{Name: fmt.Sprintf("gpu-%d-counter-set", gpu), Counters: m.counters(m.Whole, 0)}
		if m.Combined {
			cur.Spec.SharedCounters = append(cur.Spec.SharedCounters, cs)
		} else {
			counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, cs)
		}
		cur.Spec.Devices = append(cur.Spec.Devices, m.device(gpu, m.Whole, 0, cs.Name))
		for _, p := range m.Profiles {
			for k := range p.Placements {
				cur.Spec.Devices = append(cur.Spec.Devices, m.device(gpu, p, k*p.MemorySlices, cs.Name))
			}
		}
	}
	for _, s := range out {
		s.Spec.Pool.ResourceSliceCount = int64(len(out))
	}
	return out
}

// counters is what a partition of profile p placed at memory slice start
// takes from its GPU; for the whole GPU it is the GPU's counter set.
func (m MIGSpec) counters(p MIGProfile, start int) map[string]api.Counter {
	n := func(v int64) api.Counter { return api.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)} }
	c := map[string]api.Counter{
		"memory":          {Value: resource.MustParse(p.Memory)},
		"multiprocessors": n(p.Multiprocessors),
		"copy-engines":    n(p.CopyEngines),
		"decoders":        n(p.Decoders),
		"encoders":        n(p.Encoders),
		"jpeg-engines":    n(p.JPEGEngines),
		"ofa-engines":     n(p.OFAEngines),
	}
	for i := start; i < start+p.MemorySlices; i++ {
		c["memorySlice"+strconv.Itoa(i)] = n(1)
	}
	return c
}

func (m MIGSpec) device(gpu int, p MIGProfile, start int, set string) api.Device {
	name := fmt.Sprintf("gpu-%d", gpu)
	typ := "gpu"
	if p.Name != m.Whole.Name {
		name = fmt.Sprintf("gpu-%d-mig-%s-%d-%d", gpu, sanitize(p.Name), start, p.MemorySlices)
		typ = "mig"
	}
	str := func(s string) api.DeviceAttribute { return api.DeviceAttribute{StringValue: ptr.To(s)} }
	ver := func(s string) api.DeviceAttribute { return api.DeviceAttribute{VersionValue: ptr.To(s)} }
	num := func(v int) api.DeviceAttribute { return api.DeviceAttribute{IntValue: ptr.To(int64(v))} }
	parent := fmt.Sprintf("GPU-%08x-5d1e-4c0b-9a6f-%012x", 0xa100+gpu, gpu)
	attrs := map[api.QualifiedName]api.DeviceAttribute{
		"type":                            str(typ),
		"productName":                     str(m.Product),
		"brand":                           str("Nvidia"),
		"architecture":                    str(m.Architecture),
		"cudaComputeCapability":           ver(m.ComputeCapability),
		"driverVersion":                   ver(m.DriverVersion),
		"cudaDriverVersion":               ver("12.4.0"),
		"index":                           num(gpu),
		"resource.kubernetes.io/pcieRoot": str(fmt.Sprintf("pci0000:%02x", gpu/4)),
	}
	if typ == "gpu" {
		attrs["uuid"] = str(parent)
	} else {
		attrs["uuid"] = str(fmt.Sprintf("MIG-%08x-%04x-%04x", 0xa100+gpu, start, p.MemorySlices))
		attrs["parentUUID"] = str(parent)
		attrs["profile"] = str(p.Name)
		attrs["placementStart"] = num(start)
		attrs["placementSize"] = num(p.MemorySlices)
	}
	caps := map[api.QualifiedName]api.DeviceCapacity{}
	for k, v := range m.counters(p, start) {
		caps[api.QualifiedName(k)] = api.DeviceCapacity{Value: v.Value}
	}
	return api.Device{
		Name:             name,
		Attributes:       attrs,
		Capacity:         caps,
		ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: set, Counters: m.counters(p, start)}},
	}
}

// sanitize turns a profile name into a DNS-label fragment.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '.' || c == '+' {
			b[i] = '-'
		}
	}
	return string(b)
}
