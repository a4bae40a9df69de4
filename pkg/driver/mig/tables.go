package mig

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dractl/dractl/pkg/core/api"
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
	Name        string
	ProductName string
	// Brand is NVML's brand of the product; empty means "Nvidia".
	Brand             string
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
// placements of KEP-4815 ("Dynamic allocation of Multi-Instance GPUs");
// Shared is the counter set of its "Putting it all together" section.
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

// Models are the GPU models with a table, in the order they are documented.
var Models = []*GPUModel{&A100, &H100}

// ModelByName finds a model by its Name ("a100-sxm4-40gb") or by the
// short names people use ("a100", "h100").
func ModelByName(name string) (*GPUModel, error) {
	var known []string
	for _, m := range Models {
		short, _, _ := strings.Cut(m.Name, "-")
		if name == m.Name || name == short {
			return m, nil
		}
		known = append(known, m.Name)
	}
	return nil, fmt.Errorf("unknown GPU model %q; known: %s (or their first word)", name, strings.Join(known, ", "))
}

// Profile returns the row of the named profile.
func (m *GPUModel) Profile(name string) (*Profile, bool) {
	for i := range m.Profiles {
		if m.Profiles[i].Name == name {
			return &m.Profiles[i], true
		}
	}
	return nil, false
}

// DevicesPerGPU counts the full GPU plus every placement of every profile.
func (m *GPUModel) DevicesPerGPU() int {
	n := 1
	for _, p := range m.Profiles {
		n += len(p.Placements)
	}
	return n
}

// SmallestFirst orders profiles for first-fit allocation (KEP-4815 asks for
// smallest-to-largest so that a small request does not take a large
// partition): by memory, then multiprocessors, then engines, so that
// 1g.5gb comes before 1g.5gb+me, whose JPEG and OFA engines are scarce.
func (m *GPUModel) SmallestFirst() []*Profile {
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

// SharedCounters is one GPU's counter set: what MIG instances share plus
// one counter per memory slice.
func (m *GPUModel) SharedCounters() map[string]api.Counter {
	c := m.Shared.Counters()
	for i := range m.MemorySlices {
		c[MemorySliceCounter(i)] = api.Counter{Value: count(1)}
	}
	return c
}

func (r Resources) engines() int64 {
	return r.CopyEngines + r.Decoders + r.Encoders + r.JPEGEngines + r.OFAEngines
}

// Capacity is r as device capacity. Capacity names are C identifiers and
// counter names DNS labels (resource.k8s.io/v1), so the same dimension is
// spelled two ways. Zero amounts are kept: a selector can test
// decoders == 0 only if the capacity exists, and the consumptions then list
// the same dimensions as the counter set (KEP-4815).
func (r Resources) Capacity() map[api.QualifiedName]api.DeviceCapacity {
	return map[api.QualifiedName]api.DeviceCapacity{
		"memory":          {Value: quantity(r.Memory)},
		"multiprocessors": {Value: count(r.Multiprocessors)},
		"copyEngines":     {Value: count(r.CopyEngines)},
		"decoders":        {Value: count(r.Decoders)},
		"encoders":        {Value: count(r.Encoders)},
		"jpegEngines":     {Value: count(r.JPEGEngines)},
		"ofaEngines":      {Value: count(r.OFAEngines)},
	}
}

// Counters is r as counters of a counter set or of a consumption.
func (r Resources) Counters() map[string]api.Counter {
	return map[string]api.Counter{
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

// ProfileLabel turns a profile name into a DNS label: "1g.5gb+me" → "1g-5gb-me".
func ProfileLabel(profile string) string {
	return strings.NewReplacer(".", "-", "+", "-").Replace(profile)
}

// CounterSetName is the counter set of one GPU, the name KEP-4815 uses.
func CounterSetName(gpu int) string { return fmt.Sprintf("gpu-%d-counter-set", gpu) }

// GPUDeviceName and MIGDeviceName name devices; a MIG device is named after
// its first memory slice, which is unique per profile.
func GPUDeviceName(gpu int) string { return fmt.Sprintf("gpu-%d", gpu) }

func MIGDeviceName(gpu int, profile string, start int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d", gpu, ProfileLabel(profile), start)
}
