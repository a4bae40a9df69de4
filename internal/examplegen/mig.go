package examplegen

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/api"
)

// Resources is what a device offers (as capacity) or draws from its GPU
// (as counters) in each dimension MIG divides a GPU along, except memory
// slices: those are positional and belong to a placement, not a profile.
type Resources struct {
	Memory          string // a quantity, e.g. "4864Mi"
	Multiprocessors int64
	CopyEngines     int64
	Decoders        int64
	Encoders        int64
	JPEGEngines     int64
	OFAEngines      int64
}

// Profile is one row of a MIG profile table.
type Profile struct {
	Name string // as nvidia-smi prints it, e.g. "1g.5gb+me"
	Resources
	MemorySlices int
	// Placements are the memory slices an instance may start at (NVML's
	// placement start). An instance covers MemorySlices slices from there.
	Placements []int
}

// GPUModel is a GPU product with its MIG profile table.
type GPUModel struct {
	// Name is a DNS label; it names the counter-set mixin of the model.
	Name              string
	ProductName       string
	Architecture      string
	ComputeCapability string // a semantic version
	// Whole is the full GPU as a device of its own, with MIG off.
	Whole Resources
	// Shared is what MIG instances share: the GPU's counter set, all of
	// which the full-GPU device consumes. It may be less than Whole: MIG
	// can place only 98 of an A100's 108 multiprocessors.
	Shared       Resources
	MemorySlices int
	Profiles     []Profile
}

// A100 is the NVIDIA A100 40GB with the profile table and memory-slice
// placements of KEP-4815 ("Dynamic allocation of Multi-Instance GPUs").
// Shared is the counter set of KEP-4815 "Putting it all together".
var A100 = GPUModel{
	Name:              "a100-sxm4-40gb",
	ProductName:       "NVIDIA A100-SXM4-40GB",
	Architecture:      "Ampere",
	ComputeCapability: "8.0.0",
	Whole:             Resources{"40Gi", 108, 7, 5, 0, 1, 1},
	Shared:            Resources{"40Gi", 98, 7, 5, 0, 1, 1},
	MemorySlices:      8,
	Profiles: []Profile{
		{"7g.40gb", Resources{"40192Mi", 98, 7, 5, 0, 1, 1}, 8, []int{0}},
		{"4g.20gb", Resources{"19968Mi", 56, 4, 2, 0, 0, 0}, 4, []int{0}},
		{"3g.20gb", Resources{"19968Mi", 42, 3, 2, 0, 0, 0}, 4, []int{0, 4}},
		{"2g.10gb", Resources{"9856Mi", 28, 2, 1, 0, 0, 0}, 2, []int{0, 2, 4}},
		{"1g.10gb", Resources{"9856Mi", 14, 1, 1, 0, 0, 0}, 2, []int{0, 2, 4, 6}},
		{"1g.5gb+me", Resources{"4864Mi", 14, 1, 1, 0, 1, 1}, 1, []int{0, 1, 2, 3, 4, 5, 6}},
		{"1g.5gb", Resources{"4864Mi", 14, 1, 0, 0, 0, 0}, 1, []int{0, 1, 2, 3, 4, 5, 6}},
	},
}

// H100 is the NVIDIA H100 80GB HBM3 (SXM5) as `nvidia-smi mig -lgip`
// reports it, without the 1g.10gb+me profile: 18 placements over 8 memory
// slices. Hopper has no NVENC, and every MIG instance gets a JPEG decoder.
var H100 = GPUModel{
	Name:              "h100-sxm5-80gb",
	ProductName:       "NVIDIA H100 80GB HBM3",
	Architecture:      "Hopper",
	ComputeCapability: "9.0.0",
	Whole:             Resources{"80Gi", 132, 8, 7, 0, 7, 1},
	Shared:            Resources{"80Gi", 132, 8, 7, 0, 7, 1},
	MemorySlices:      8,
	Profiles: []Profile{
		{"7g.80gb", Resources{"81152Mi", 132, 8, 7, 0, 7, 1}, 8, []int{0}},
		{"4g.40gb", Resources{"40448Mi", 64, 4, 4, 0, 4, 0}, 4, []int{0}},
		{"3g.40gb", Resources{"40448Mi", 60, 3, 3, 0, 3, 0}, 4, []int{0, 4}},
		{"2g.20gb", Resources{"20096Mi", 32, 2, 2, 0, 2, 0}, 2, []int{0, 2, 4}},
		{"1g.20gb", Resources{"20096Mi", 26, 1, 1, 0, 1, 0}, 2, []int{0, 2, 4, 6}},
		{"1g.10gb", Resources{"9984Mi", 16, 1, 1, 0, 1, 0}, 1, []int{0, 1, 2, 3, 4, 5, 6}},
	},
}

// DevicesPerGPU counts the full GPU plus every placement of every profile.
func (m *GPUModel) DevicesPerGPU() int {
	n := 1
	for _, p := range m.Profiles {
		n += len(p.Placements)
	}
	return n
}

// smallestFirst orders profiles for first-fit allocation (KEP-4815 asks for
// smallest-to-largest so that a small request does not take a large
// partition): by memory, then multiprocessors, then engines, so that
// 1g.5gb comes before 1g.5gb+me, whose JPEG and OFA engines are scarce.
func (m *GPUModel) smallestFirst() []*Profile {
	out := make([]*Profile, len(m.Profiles))
	for i := range m.Profiles {
		out[i] = &m.Profiles[i]
	}
	slices.SortStableFunc(out, func(a, b *Profile) int {
		ma, mb := quantity(a.Memory), quantity(b.Memory)
		if c := ma.Cmp(mb); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Multiprocessors, b.Multiprocessors); c != 0 {
			return c
		}
		return cmp.Compare(a.engines(), b.engines())
	})
	return out
}

func (r Resources) engines() int64 {
	return r.CopyEngines + r.Decoders + r.Encoders + r.JPEGEngines + r.OFAEngines
}

// Capacity names are C identifiers and counter names DNS labels (resource.k8s.io/v1 API reference),
// so the same dimension is spelled two ways. Zero amounts are kept: a
// selector can test decoders == 0 only if the capacity exists, and the
// consumptions then list the same dimensions as the counter set (KEP-4815).
func (r Resources) capacity() capacities {
	return capacities{
		"memory":          {Value: quantity(r.Memory)},
		"multiprocessors": {Value: count(r.Multiprocessors)},
		"copyEngines":     {Value: count(r.CopyEngines)},
		"decoders":        {Value: count(r.Decoders)},
		"encoders":        {Value: count(r.Encoders)},
		"jpegEngines":     {Value: count(r.JPEGEngines)},
		"ofaEngines":      {Value: count(r.OFAEngines)},
	}
}

func (r Resources) counters() counters {
	return counters{
		"memory":          {Value: quantity(r.Memory)},
		"multiprocessors": {Value: count(r.Multiprocessors)},
		"copy-engines":    {Value: count(r.CopyEngines)},
		"decoders":        {Value: count(r.Decoders)},
		"encoders":        {Value: count(r.Encoders)},
		"jpeg-engines":    {Value: count(r.JPEGEngines)},
		"ofa-engines":     {Value: count(r.OFAEngines)},
	}
}

// MemorySliceCounter names the counter of one memory slice. KEP-4815 spells
// it memorySlice0, which is not a DNS label and so not a valid counter name.
func MemorySliceCounter(i int) string { return fmt.Sprintf("memory-slice-%d", i) }

// memorySlices is the consumption of the slices [start, start+n).
func memorySlices(start, n int) counterMixin {
	c := counters{}
	for i := start; i < start+n; i++ {
		c[MemorySliceCounter(i)] = api.Counter{Value: count(1)}
	}
	name := fmt.Sprintf("memory-slices-%d-%d", start, start+n-1)
	if n == 1 {
		name = fmt.Sprintf("memory-slice-%d", start)
	}
	return counterMixin{name: name, counters: c}
}

// ProfileLabel turns a profile name into a DNS label: "1g.5gb+me" → "1g-5gb-me".
func ProfileLabel(profile string) string {
	return strings.NewReplacer(".", "-", "+", "-").Replace(profile)
}

// MIGNode is one node's GPUs, published as one pool named after the node,
// as the NVIDIA DRA driver does.
type MIGNode struct {
	Driver            string
	Node              string
	Model             *GPUModel
	GPUs              int
	DriverVersion     string // a semantic version, e.g. "550.54.15"
	CUDADriverVersion string
	// GPUsPerSlice bounds the GPUs whose devices share a slice; zero means
	// as many as the per-slice device limit of the form allows.
	GPUsPerSlice int
}

// GPUUUID is the UUID of one GPU. It is derived from node and index so that
// regenerating the examples does not change it.
func (n *MIGNode) GPUUUID(gpu int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", n.Driver, n.Node, gpu))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// CounterSetName is the counter set of one GPU, the name KEP-4815 uses.
func CounterSetName(gpu int) string { return fmt.Sprintf("gpu-%d-counter-set", gpu) }

// GPUDeviceName and MIGDeviceName name devices; a MIG device is named after
// its first memory slice, which is unique per profile.
func GPUDeviceName(gpu int) string { return fmt.Sprintf("gpu-%d", gpu) }

func MIGDeviceName(gpu int, profile string, start int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d", gpu, ProfileLabel(profile), start)
}

// devices lists one GPU's devices smallest first, the full GPU last.
func (n *MIGNode) devices(gpu int) []device {
	m := n.Model
	common := deviceMixin{
		name: "common",
		attributes: attributes{
			"productName":           str(m.ProductName),
			"brand":                 str("Nvidia"),
			"architecture":          str(m.Architecture),
			"cudaComputeCapability": version(m.ComputeCapability),
			"driverVersion":         version(n.DriverVersion),
			"cudaDriverVersion":     version(n.CUDADriverVersion),
		},
	}
	// MIG devices are created only when allocated (KEP-4815), so they have
	// no UUID of their own yet; parentUUID is what claims match on.
	parent := deviceMixin{
		name: fmt.Sprintf("gpu-%d-parent", gpu),
		attributes: attributes{
			"parentUUID":  str(n.GPUUUID(gpu)),
			"parentIndex": integer(gpu),
		},
	}
	set := CounterSetName(gpu)
	var out []device
	for _, p := range m.smallestFirst() {
		label := "mig-" + ProfileLabel(p.Name)
		profile := deviceMixin{
			name: label,
			attributes: attributes{
				"type":          str("mig"),
				"profile":       str(p.Name),
				"placementSize": integer(p.MemorySlices),
			},
			capacity: p.capacity(),
		}
		draws := counterMixin{name: label, counters: p.counters()}
		for _, start := range p.Placements {
			out = append(out, device{
				name:       MIGDeviceName(gpu, p.Name, start),
				includes:   []deviceMixin{common, parent, profile},
				attributes: attributes{"placementStart": integer(start)},
				counterSet: set,
				consumes:   []counterMixin{draws, memorySlices(start, p.MemorySlices)},
			})
		}
	}
	whole := deviceMixin{
		name:       "whole-gpu",
		attributes: attributes{"type": str("gpu")},
		capacity:   m.Whole.capacity(),
	}
	out = append(out, device{
		name:     GPUDeviceName(gpu),
		includes: []deviceMixin{common, whole},
		attributes: attributes{
			"uuid":  str(n.GPUUUID(gpu)),
			"index": integer(gpu),
		},
		counterSet: set,
		consumes: []counterMixin{
			{name: "whole-gpu", counters: m.Shared.counters()},
			memorySlices(0, m.MemorySlices),
		},
	})
	return out
}

// counterSet is one GPU's counter set; in mixin form every GPU includes the
// model's counter-set mixin.
func (n *MIGNode) counterSet(gpu int) counterSet {
	c := n.Model.Shared.counters()
	for i := range n.Model.MemorySlices {
		c[MemorySliceCounter(i)] = api.Counter{Value: count(1)}
	}
	return counterSet{name: CounterSetName(gpu), includes: []counterMixin{{name: n.Model.Name, counters: c}}}
}

// Slices returns the node's pool: the counter sets in slices of their own
// (KEP-4815 allows sharedCounters or devices per slice, never both), then
// the devices, GPU by GPU, as few GPUs per slice as the limits of the form
// require. Both forms yield the same slice names, devices and counter sets
// once flattened.
func (n *MIGNode) Slices(form Form) []*api.ResourceSlice {
	maxDevices, maxSets := flatMaxDevicesWithCounters, flatMaxCounterSets
	if form == Mixins {
		maxDevices, maxSets = mixinMaxDevices, mixinMaxCounterSets
	}
	perSlice := n.GPUsPerSlice
	if perSlice == 0 {
		perSlice = max(1, maxDevices/n.Model.DevicesPerGPU())
	}

	var out []*api.ResourceSlice
	newSlice := func(name string) *api.ResourceSlice {
		s := &api.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: api.ResourceSliceSpec{
				Driver:   n.Driver,
				Pool:     api.ResourcePool{Name: n.Node, Generation: 1},
				NodeName: ptr.To(n.Node),
			},
		}
		out = append(out, s)
		return s
	}
	for first := 0; first < n.GPUs; first += maxSets {
		last := min(first+maxSets, n.GPUs) - 1
		name := n.Node + "-counters"
		if n.GPUs > maxSets {
			name += gpuRange(first, last)
		}
		s := newSlice(name)
		mc := newMixinCollector()
		var sets []counterSet
		for gpu := first; gpu <= last; gpu++ {
			sets = append(sets, n.counterSet(gpu))
		}
		s.Spec.SharedCounters = writeCounterSets(sets, form, mc)
		s.Spec.Mixins = mc.result()
	}
	for first := 0; first < n.GPUs; first += perSlice {
		last := min(first+perSlice, n.GPUs) - 1
		s := newSlice(n.Node + gpuRange(first, last))
		mc := newMixinCollector()
		var devs []device
		for gpu := first; gpu <= last; gpu++ {
			devs = append(devs, n.devices(gpu)...)
		}
		s.Spec.Devices = writeDevices(devs, form, mc)
		s.Spec.Mixins = mc.result()
	}
	for _, s := range out {
		s.Spec.Pool.ResourceSliceCount = int64(len(out))
	}
	return out
}

func gpuRange(first, last int) string {
	if first == last {
		return fmt.Sprintf("-gpu-%d", first)
	}
	return fmt.Sprintf("-gpu-%d-%d", first, last)
}
