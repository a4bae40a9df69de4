package mig

import (
	"bytes"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
)

// The nodes of the A100 and DGX H100 examples.
var (
	a100Node = Node{Driver: "gpu.nvidia.com", Node: "a100-node", Model: &A100, GPUs: 2,
		DriverVersion: "550.54.15", CUDADriverVersion: "12.4.0"}
	dgxNode = Node{Driver: "gpu.nvidia.com", Node: "dgx-h100-node", Model: &H100, GPUs: 8,
		DriverVersion: "560.35.3", CUDADriverVersion: "12.6.0", GPUsPerSlice: 2}
)

func render(ss []*api.ResourceSlice) ([]byte, error) {
	var b bytes.Buffer
	for _, s := range ss {
		data, err := yaml.Marshal(s)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes(), nil
}

// TestProfileTables pins the tables to KEP-4815 (A100) and to the H100
// figures of `nvidia-smi mig -lgip`: placement counts, placements inside the memory
// slices and not overlapping each other, and no profile asking for more
// than the GPU shares.
func TestProfileTables(t *testing.T) {
	for _, tc := range []struct {
		model      *GPUModel
		placements map[string]int
		devices    int
	}{
		{&A100, map[string]int{"7g.40gb": 1, "4g.20gb": 1, "3g.20gb": 2, "2g.10gb": 3, "1g.10gb": 4, "1g.5gb": 7, "1g.5gb+me": 7}, 26},
		{&H100, map[string]int{"7g.80gb": 1, "4g.40gb": 1, "3g.40gb": 2, "2g.20gb": 3, "1g.20gb": 4, "1g.10gb": 7}, 19},
	} {
		m := tc.model
		t.Run(m.Name, func(t *testing.T) {
			if got := m.DevicesPerGPU(); got != tc.devices {
				t.Errorf("DevicesPerGPU() = %d, want %d", got, tc.devices)
			}
			if len(m.Profiles) != len(tc.placements) {
				t.Errorf("%d profiles, want %d", len(m.Profiles), len(tc.placements))
			}
			shared := m.Shared.Counters()
			for _, p := range m.Profiles {
				if want, ok := tc.placements[p.Name]; !ok || len(p.Placements) != want {
					t.Errorf("%s: %d placements, want %d (known: %v)", p.Name, len(p.Placements), want, ok)
				}
				used := make([]bool, m.MemorySlices)
				for _, start := range p.Placements {
					if start < 0 || start+p.MemorySlices > m.MemorySlices {
						t.Errorf("%s at %d: slices %d..%d outside 0..%d", p.Name, start, start, start+p.MemorySlices-1, m.MemorySlices-1)
						continue
					}
					for i := start; i < start+p.MemorySlices; i++ {
						if used[i] {
							t.Errorf("%s: two placements share memory slice %d", p.Name, i)
						}
						used[i] = true
					}
				}
				for name, c := range p.Counters() {
					if avail := shared[name].Value; c.Value.Cmp(avail) > 0 {
						t.Errorf("%s needs %s %s, the GPU shares only %s", p.Name, c.Value.String(), name, avail.String())
					}
				}
			}
		})
	}
}

// pool is one form of a MIG node read back: devices by name, counter sets
// by name, both as they are once flattened.
type pool struct {
	devices map[string]api.Device
	sets    map[string]map[string]api.Counter
	order   []string
}

func readPool(t *testing.T, ss []*api.ResourceSlice) pool {
	t.Helper()
	p := pool{devices: map[string]api.Device{}, sets: map[string]map[string]api.Counter{}}
	for _, s := range ss {
		f, err := api.Flatten(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Spec.Devices {
			p.devices[d.Name] = d
			p.order = append(p.order, d.Name)
		}
		for _, cs := range f.Spec.SharedCounters {
			p.sets[cs.Name] = cs.Counters
		}
	}
	return p
}

// fits reports whether the devices can be allocated together: for every
// counter, what they consume does not exceed the counter set. This is the
// allocator's rule (KEP-4815), applied to the generated data.
func (p pool) fits(t *testing.T, names ...string) bool {
	t.Helper()
	used := map[string]map[string]resource.Quantity{}
	for _, n := range names {
		d, ok := p.devices[n]
		if !ok {
			t.Fatalf("no device %s", n)
		}
		for _, c := range d.ConsumesCounters {
			if used[c.CounterSet] == nil {
				used[c.CounterSet] = map[string]resource.Quantity{}
			}
			for name, v := range c.Counters {
				q := used[c.CounterSet][name]
				q.Add(v.Value)
				used[c.CounterSet][name] = q
			}
		}
	}
	for set, cs := range used {
		for name, q := range cs {
			avail, ok := p.sets[set][name]
			if !ok {
				t.Fatalf("counter set %s has no counter %s", set, name)
			}
			if q.Cmp(avail.Value) > 0 {
				return false
			}
		}
	}
	return true
}

// TestMIGCombinations checks the generated counters against MIG layouts
// that real GPUs accept or reject, including the four-device layout that
// KEP-4815 draws for its four-request claim.
func TestMIGCombinations(t *testing.T) {
	a100 := readPool(t, a100Node.Slices(Flat))
	h100 := readPool(t, dgxNode.Slices(Flat))
	mig := func(profile string, starts ...int) []string {
		var out []string
		for _, s := range starts {
			out = append(out, MIGDeviceName(0, profile, s))
		}
		return out
	}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	for _, tc := range []struct {
		name    string
		p       pool
		devices []string
		want    bool
	}{
		{"A100 KEP-4815 claim", a100, cat(mig("1g.5gb", 0, 1), mig("2g.10gb", 2), mig("3g.20gb", 4)), true},
		{"A100 7x 1g.5gb", a100, mig("1g.5gb", 0, 1, 2, 3, 4, 5, 6), true},
		{"A100 4x 1g.10gb", a100, mig("1g.10gb", 0, 2, 4, 6), true},
		{"A100 4g + 3g", a100, cat(mig("4g.20gb", 0), mig("3g.20gb", 4)), true},
		{"A100 3x 2g.10gb + 1g.5gb", a100, cat(mig("2g.10gb", 0, 2, 4), mig("1g.5gb", 6)), true},
		{"A100 one 1g.5gb+me with 1g.5gb", a100, cat(mig("1g.5gb+me", 0), mig("1g.5gb", 1, 2, 3, 4, 5, 6)), true},
		{"A100 two 1g.5gb+me (one JPEG, one OFA engine)", a100, mig("1g.5gb+me", 0, 1), false},
		{"A100 4g and 3g on the same slices", a100, cat(mig("4g.20gb", 0), mig("3g.20gb", 0)), false},
		{"A100 7g and 1g.5gb", a100, cat(mig("7g.40gb", 0), mig("1g.5gb", 6)), false},
		{"A100 full GPU and 1g.5gb", a100, cat([]string{GPUDeviceName(0)}, mig("1g.5gb", 6)), false},
		{"A100 full GPU of each GPU", a100, []string{GPUDeviceName(0), GPUDeviceName(1)}, true},
		{"A100 3g.20gb on two GPUs", a100, []string{MIGDeviceName(0, "3g.20gb", 0), MIGDeviceName(1, "3g.20gb", 0)}, true},
		{"H100 7x 1g.10gb", h100, mig("1g.10gb", 0, 1, 2, 3, 4, 5, 6), true},
		{"H100 4x 1g.20gb", h100, mig("1g.20gb", 0, 2, 4, 6), true},
		{"H100 2x 3g.40gb", h100, mig("3g.40gb", 0, 4), true},
		{"H100 4g + 3g", h100, cat(mig("4g.40gb", 0), mig("3g.40gb", 4)), true},
		{"H100 7x 1g.10gb and 1g.20gb on slices 6-7", h100, cat(mig("1g.10gb", 0, 1, 2, 3, 4, 5, 6), mig("1g.20gb", 6)), false},
		{"H100 7g and 1g.10gb", h100, cat(mig("7g.80gb", 0), mig("1g.10gb", 0)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.fits(t, tc.devices...); got != tc.want {
				t.Errorf("fits(%v) = %v, want %v", tc.devices, got, tc.want)
			}
		})
	}
}

// TestFormsAgree: the mixin form must describe exactly the pool of the flat
// form, slice by slice, once flattened.
func TestFormsAgree(t *testing.T) {
	for _, n := range []*Node{&a100Node, &dgxNode} {
		t.Run(n.Node, func(t *testing.T) {
			flat, mixed := n.Slices(Flat), n.Slices(Mixins)
			if n.GPUsPerSlice == 0 {
				// Without a fixed split the mixin form may pack more GPUs
				// per slice, so only the devices can be compared.
				a, b := readPool(t, flat), readPool(t, mixed)
				if !equality.Semantic.DeepEqual(a.devices, b.devices) || !equality.Semantic.DeepEqual(a.sets, b.sets) || !slices.Equal(a.order, b.order) {
					t.Error("flattened devices or counter sets differ between the forms")
				}
				return
			}
			if len(flat) != len(mixed) {
				t.Fatalf("%d flat slices, %d mixin slices", len(flat), len(mixed))
			}
			for i := range flat {
				if flat[i].UsesMixins() {
					t.Errorf("flat slice %s uses mixins", flat[i].Name)
				}
				if !mixed[i].UsesMixins() {
					t.Errorf("mixin slice %s uses no mixins", mixed[i].Name)
				}
				got, err := api.Flatten(mixed[i])
				if err != nil {
					t.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(got, flat[i]) {
					t.Errorf("slice %s: flattened mixin form differs from flat form", flat[i].Name)
				}
			}
		})
	}
}

// TestSmallestFirst: within each GPU, devices come in non-decreasing
// memory and the full GPU comes last, so first-fit takes small partitions
// first (KEP-4815).
func TestSmallestFirst(t *testing.T) {
	for _, n := range []*Node{&a100Node, &dgxNode} {
		p := readPool(t, n.Slices(Flat))
		per := n.Model.DevicesPerGPU()
		if len(p.order) != n.GPUs*per {
			t.Fatalf("%s: %d devices, want %d", n.Node, len(p.order), n.GPUs*per)
		}
		for gpu := range n.GPUs {
			names := p.order[gpu*per : (gpu+1)*per]
			if last := names[len(names)-1]; last != GPUDeviceName(gpu) {
				t.Errorf("%s: GPU %d ends with %s, want the full GPU", n.Node, gpu, last)
			}
			for i := 1; i < len(names); i++ {
				a, b := p.devices[names[i-1]].Capacity["memory"].Value, p.devices[names[i]].Capacity["memory"].Value
				if a.Cmp(b) > 0 {
					t.Errorf("%s: %s (%s) before %s (%s)", n.Node, names[i-1], a.String(), names[i], b.String())
				}
			}
		}
	}
}

// TestFlatSplitsAtLimits uses a node larger than any example so that both
// the counter-set limit (8 per slice) and the device limit (64 per slice
// with counters) force splits.
func TestFlatSplitsAtLimits(t *testing.T) {
	n := a100Node
	n.Node, n.GPUs = "big-node", 10
	ss := n.Slices(Flat)
	var names []string
	devices, sets := 0, 0
	for _, s := range ss {
		names = append(names, s.Name)
		if s.Spec.Pool.ResourceSliceCount != int64(len(ss)) {
			t.Errorf("%s: resourceSliceCount %d, want %d", s.Name, s.Spec.Pool.ResourceSliceCount, len(ss))
		}
		if len(s.Spec.Devices) > 0 && len(s.Spec.SharedCounters) > 0 {
			t.Errorf("%s has both devices and counter sets", s.Name)
		}
		if len(s.Spec.Devices) > validation.MaxDevicesWithAdvancedFeatures || len(s.Spec.SharedCounters) > validation.MaxCounterSets {
			t.Errorf("%s: %d devices, %d counter sets", s.Name, len(s.Spec.Devices), len(s.Spec.SharedCounters))
		}
		devices += len(s.Spec.Devices)
		sets += len(s.Spec.SharedCounters)
	}
	want := []string{
		"big-node-counters-gpu-0-7", "big-node-counters-gpu-8-9",
		"big-node-gpu-0-1", "big-node-gpu-2-3", "big-node-gpu-4-5", "big-node-gpu-6-7", "big-node-gpu-8-9",
	}
	if !slices.Equal(names, want) {
		t.Errorf("slices %v, want %v", names, want)
	}
	if devices != 10*26 || sets != 10 {
		t.Errorf("%d devices and %d counter sets, want 260 and 10", devices, sets)
	}
}

// TestMixinsShrinkSlices guards the point of the mixin examples.
func TestMixinsShrinkSlices(t *testing.T) {
	for _, n := range []*Node{&a100Node, &dgxNode} {
		flat, err := render(n.Slices(Flat))
		if err != nil {
			t.Fatal(err)
		}
		mixed, err := render(n.Slices(Mixins))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes flat, %d bytes with mixins", n.Node, len(flat), len(mixed))
		if 2*len(mixed) > len(flat) {
			t.Errorf("%s: mixin form is %d bytes, more than half the flat %d", n.Node, len(mixed), len(flat))
		}
	}
}
