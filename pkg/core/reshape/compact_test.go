package reshape

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
)

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0xc0de)) }

// checkCompact asserts everything Compact promises for one input.
func checkCompact(t *testing.T, name string, in *api.ResourceSlice, opts Options) (*api.ResourceSlice, Stats) {
	t.Helper()
	orig := in.DeepCopy()
	// The oracle is testgen's eager flattener, so that the property holds
	// Compact to the KEP's precedence rules rather than to api.Flatten.
	want, err := testgen.ReferenceFlatten(in)
	if err != nil {
		t.Fatalf("%s: input does not flatten: %v", name, err)
	}
	out, st, err := Compact(in, opts)
	if err != nil {
		t.Fatalf("%s: Compact: %v", name, err)
	}
	if !equality.Semantic.DeepEqual(in, orig) {
		t.Fatalf("%s: Compact modified its input", name)
	}
	got, err := api.Flatten(out)
	if err != nil {
		t.Fatalf("%s: result does not flatten: %v", name, err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("%s: Flatten(Compact(x)) != Flatten(x)\n got %s\nwant %s", name, gj, wj)
	}
	checkLimits(t, name, out, opts)
	if !out.UsesMixins() {
		// Nothing was factored out: the result is the flattened input.
		if !equality.Semantic.DeepEqual(out, want) {
			t.Fatalf("%s: result without mixins is not the flattened input", name)
		}
	}

	outJSON, _ := json.Marshal(out)
	flatJSON, _ := json.Marshal(want)
	inJSON, _ := json.Marshal(in)
	if st.BytesAfter != len(outJSON) || st.BytesBefore != len(inJSON) {
		t.Fatalf("%s: stats %+v, encodings in=%d out=%d", name, st, len(inJSON), len(outJSON))
	}
	if st.BytesAfter > len(flatJSON) {
		t.Fatalf("%s: result (%d bytes) larger than the flattened input (%d)", name, st.BytesAfter, len(flatJSON))
	}
	var m api.ResourceSliceMixins
	if out.Spec.Mixins != nil {
		m = *out.Spec.Mixins
	}
	if st.DeviceMixins != len(m.Device) || st.ConsumptionMixins != len(m.DeviceCounterConsumption) || st.CounterSetMixins != len(m.CounterSet) {
		t.Fatalf("%s: stats %+v disagree with mixins %d/%d/%d", name, st, len(m.Device), len(m.DeviceCounterConsumption), len(m.CounterSet))
	}

	again, _, err := Compact(in.DeepCopy(), opts)
	if err != nil {
		t.Fatal(err)
	}
	againJSON, _ := json.Marshal(again)
	if !bytes.Equal(outJSON, againJSON) {
		t.Fatalf("%s: Compact is not deterministic", name)
	}
	return out, st
}

func checkLimits(t *testing.T, name string, s *api.ResourceSlice, opts Options) {
	t.Helper()
	if s.Spec.Mixins != nil {
		m := s.Spec.Mixins
		if len(m.Device) > limit(opts.MaxDeviceMixins, MaxDeviceMixins) ||
			len(m.DeviceCounterConsumption) > limit(opts.MaxConsumptionMixins, MaxConsumptionMixins) ||
			len(m.CounterSet) > limit(opts.MaxCounterSetMixins, MaxCounterSetMixins) {
			t.Fatalf("%s: too many mixins: %d/%d/%d", name, len(m.Device), len(m.DeviceCounterConsumption), len(m.CounterSet))
		}
		for _, d := range m.Device {
			if len(d.Attributes)+len(d.Capacity) == 0 {
				t.Fatalf("%s: empty device mixin %s", name, d.Name)
			}
		}
		for _, c := range m.DeviceCounterConsumption {
			if len(c.Counters) == 0 {
				t.Fatalf("%s: consumption mixin %s without counters", name, c.Name)
			}
		}
		for _, c := range m.CounterSet {
			if len(c.Counters) == 0 {
				t.Fatalf("%s: counter set mixin %s without counters", name, c.Name)
			}
		}
	}
	for _, d := range s.Spec.Devices {
		if len(d.Includes) > limit(opts.MaxDeviceIncludes, MaxDeviceIncludes) {
			t.Fatalf("%s: device %s includes %d mixins", name, d.Name, len(d.Includes))
		}
		for _, c := range d.ConsumesCounters {
			if len(c.Includes) > limit(opts.MaxConsumptionIncludes, MaxConsumptionIncludes) {
				t.Fatalf("%s: consumption of %s includes %d mixins", name, d.Name, len(c.Includes))
			}
		}
	}
	for _, cs := range s.Spec.SharedCounters {
		if len(cs.Includes) > limit(opts.MaxCounterSetIncludes, MaxCounterSetIncludes) {
			t.Fatalf("%s: counter set %s includes %d mixins", name, cs.Name, len(cs.Includes))
		}
	}
}

func TestCompactRandomSlices(t *testing.T) {
	var saved, compacted int
	for seed := range uint64(300) {
		in := testgen.Slice(rng(seed), testgen.Options{})
		_, st := checkCompact(t, "seed "+itoa(seed), in, Options{})
		if st.DeviceMixins+st.ConsumptionMixins+st.CounterSetMixins > 0 {
			compacted++
		}
		saved += st.BytesBefore - st.BytesAfter
	}
	// Random slices share little, but a generator change that makes the
	// property vacuous (nothing ever compacted) must not go unnoticed.
	if compacted < 30 {
		t.Fatalf("only %d of 300 random slices were compacted", compacted)
	}
	t.Logf("%d of 300 compacted, %d bytes saved in total", compacted, saved)
}

// Tight limits force the planner to leave profitable groups out; the
// result must still be equivalent and within the lowered limits.
func TestCompactRandomSlicesTightLimits(t *testing.T) {
	opts := Options{MaxDeviceMixins: 2, MaxConsumptionMixins: 1, MaxCounterSetMixins: 1,
		MaxDeviceIncludes: 1, MaxConsumptionIncludes: 1, MaxCounterSetIncludes: 1}
	for seed := range uint64(100) {
		in := testgen.Slice(rng(seed), testgen.Options{MaxDevices: 64, Layout: testgen.LayoutCombined})
		checkCompact(t, "seed "+itoa(seed), in, opts)
	}
}

func TestCompactRandomPools(t *testing.T) {
	for seed := range uint64(100) {
		for i, s := range testgen.Pool(rng(seed), testgen.Options{Mixins: testgen.MixinsAlways}) {
			checkCompact(t, "seed "+itoa(seed)+" slice "+itoa(uint64(i)), s, Options{})
		}
	}
}

func TestCompactSkip(t *testing.T) {
	in := a100()
	out, st := checkCompact(t, "skip all", in, Options{SkipDevices: true, SkipConsumptions: true, SkipCounterSets: true})
	if out.Spec.Mixins != nil || st.BytesAfter != st.BytesBefore {
		t.Fatalf("skipping every kind still produced mixins: %+v", st)
	}
	_, st = checkCompact(t, "devices only", in, Options{SkipConsumptions: true, SkipCounterSets: true})
	if st.DeviceMixins == 0 || st.ConsumptionMixins != 0 || st.CounterSetMixins != 0 {
		t.Fatalf("devices only: %+v", st)
	}
}

// a100 is the device slice of a one-GPU A100 node in flat form: the full
// GPU and every MIG placement of KEP-4815's profile table.
func a100() *api.ResourceSlice {
	n := examplegen.A100Node
	n.GPUs = 1
	return n.Slices(examplegen.Flat)[1]
}

func TestCompactA100(t *testing.T) {
	in := a100()
	out, st := checkCompact(t, "A100", in, Options{})
	t.Logf("A100 1 GPU, %d devices: %d -> %d bytes (%.0f%%), %d device / %d consumption mixins",
		len(in.Spec.Devices), st.BytesBefore, st.BytesAfter, 100*float64(st.BytesAfter)/float64(st.BytesBefore), st.DeviceMixins, st.ConsumptionMixins)
	// productName, architecture and driverVersion are shared by all 26
	// devices: mixins carry them, and far fewer mixins than devices do.
	carriers := map[string]bool{}
	for _, m := range out.Spec.Mixins.Device {
		if _, ok := m.Attributes["productName"]; ok {
			carriers[m.Name] = true
			for _, k := range []api.QualifiedName{"architecture", "driverVersion", "brand"} {
				if _, ok := m.Attributes[k]; !ok {
					t.Errorf("mixin %s has productName but not %s", m.Name, k)
				}
			}
		}
	}
	if len(carriers) == 0 || 2*len(carriers) > len(out.Spec.Devices) {
		t.Errorf("%d mixins carry productName for %d devices", len(carriers), len(out.Spec.Devices))
	}
	for _, d := range out.Spec.Devices {
		if _, ok := d.Attributes["productName"]; ok {
			t.Errorf("device %s still states productName", d.Name)
		}
		found := false
		for _, n := range d.Includes {
			found = found || carriers[n]
		}
		if !found {
			t.Errorf("device %s includes no mixin with productName", d.Name)
		}
	}
	// The seven 1g.5gb partitions consume the same counters apart from
	// their memory slice: that shared part must come from a mixin.
	if st.ConsumptionMixins == 0 {
		t.Errorf("no consumption mixins for MIG partitions")
	}
	if st.BytesAfter*2 > st.BytesBefore {
		t.Errorf("A100 compacted only to %d of %d bytes", st.BytesAfter, st.BytesBefore)
	}
}

func TestCompactH100Pool(t *testing.T) {
	before, after := 0, 0
	for i, s := range examplegen.DGXH100Node.Slices(examplegen.Flat) {
		_, st := checkCompact(t, "H100 slice "+itoa(uint64(i)), s, Options{})
		before += st.BytesBefore
		after += st.BytesAfter
	}
	t.Logf("H100 x8 pool: %d -> %d bytes (%.0f%%)", before, after, 100*float64(after)/float64(before))
	if after >= before {
		t.Fatalf("H100 pool did not shrink")
	}
}

// Identical counter sets (eight GPUs of one kind) collapse into one mixin
// that every set includes.
func TestCompactIdenticalCounterSets(t *testing.T) {
	s := examplegen.DGXH100Node.Slices(examplegen.Flat)[0]
	out, st := checkCompact(t, "H100 counters", s, Options{})
	if st.CounterSetMixins != 1 {
		t.Fatalf("want 1 counter set mixin, got %d", st.CounterSetMixins)
	}
	for _, cs := range out.Spec.SharedCounters {
		if len(cs.Counters) != 0 || len(cs.Includes) != 1 {
			t.Fatalf("set %s: %d own counters, includes %v", cs.Name, len(cs.Counters), cs.Includes)
		}
	}
}

// Compacting an already mixin-based slice replaces its mixins; compacting
// the result again changes nothing (the flattened form is the same).
func TestCompactIdempotent(t *testing.T) {
	for seed := range uint64(100) {
		in := testgen.Slice(rng(seed), testgen.Options{Mixins: testgen.MixinsAlways})
		once, _, err := Compact(in, Options{})
		if err != nil {
			t.Fatal(err)
		}
		twice, _, err := Compact(once, Options{})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(once)
		b, _ := json.Marshal(twice)
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d: Compact(Compact(x)) != Compact(x)", seed)
		}
	}
}

// Two devices with nothing in common, or a single device, give nothing to
// factor out: the output is the flattened input.
func TestCompactNothingToShare(t *testing.T) {
	one := &api.ResourceSlice{Spec: api.ResourceSliceSpec{Driver: "d", Devices: []api.Device{{
		Name:       "a",
		Attributes: map[api.QualifiedName]api.DeviceAttribute{"x": {IntValue: ptr.To[int64](1)}},
	}}}}
	out, st := checkCompact(t, "single", one, Options{})
	if out.Spec.Mixins != nil || st.BytesAfter != st.BytesBefore {
		t.Fatalf("single device: %+v", st)
	}
	two := one.DeepCopy()
	two.Spec.Devices = append(two.Spec.Devices, api.Device{
		Name:       "b",
		Attributes: map[api.QualifiedName]api.DeviceAttribute{"x": {IntValue: ptr.To[int64](2)}},
	})
	if out, _ := checkCompact(t, "distinct", two, Options{}); out.Spec.Mixins != nil {
		t.Fatalf("distinct values were factored out")
	}
}

// Semantically equal quantities with different encodings must not be
// merged into one mixin entry: the flattened result would differ in form.
func TestCompactKeepsQuantityForms(t *testing.T) {
	s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{Driver: "d"}}
	for i := range 6 {
		q := resource.MustParse("1Gi")
		if i%2 == 1 {
			q = resource.MustParse("1073741824")
		}
		s.Spec.Devices = append(s.Spec.Devices, api.Device{
			Name:     "dev-" + itoa(uint64(i)),
			Capacity: map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q}, "example.org/a-long-capacity-name": {Value: resource.MustParse("1")}},
		})
	}
	out, _ := checkCompact(t, "quantities", s, Options{})
	flat, _ := api.Flatten(out)
	for i, d := range flat.Spec.Devices {
		want := "1Gi"
		if i%2 == 1 {
			want = "1073741824"
		}
		if got := d.Capacity["memory"].Value; got.String() != want {
			t.Fatalf("device %d: memory %s, want %s", i, got.String(), want)
		}
	}
}

func TestCompactUnknownInclude(t *testing.T) {
	s := a100()
	s.Spec.Devices[1].Includes = []string{"missing"}
	_, _, err := Compact(s, Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "spec.devices[1].includes[0]") {
		t.Fatalf("want an error at spec.devices[1].includes[0], got %v", err)
	}
}

func itoa(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// BenchmarkCompactMIGSlice compacts the first device slice of a 4-GPU A100
// node in flat form (2 GPUs, 52 devices: the v1 limit of 64 devices with
// counters keeps the third GPU out).
func BenchmarkCompactMIGSlice(b *testing.B) {
	n := examplegen.A100Node
	n.GPUs = 4
	s := n.Slices(examplegen.Flat)[1]
	b.ReportAllocs()
	var st Stats
	for b.Loop() {
		var err error
		if _, st, err = Compact(s, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.BytesBefore), "bytes-before")
	b.ReportMetric(float64(st.BytesAfter), "bytes-after")
}

// FuzzCompact explores generator seeds and limit settings beyond the fixed
// seed sets: go test -fuzz FuzzCompact ./pkg/core/reshape
func FuzzCompact(f *testing.F) {
	f.Add(uint64(0), uint8(0))
	f.Add(uint64(7), uint8(0xff))
	f.Fuzz(func(t *testing.T, seed uint64, knobs uint8) {
		gen := testgen.Options{MaxDevices: 1 + int(knobs&63), Layout: testgen.Layout(knobs >> 6)}
		opts := Options{}
		if knobs&1 == 1 {
			opts = Options{MaxDeviceMixins: 3, MaxDeviceIncludes: 2, MaxConsumptionIncludes: 1, MaxCounterSetMixins: 1}
		}
		checkCompact(t, "fuzz", testgen.Slice(rng(seed), gen), opts)
	})
}

// TestPlanTakesTheBetterPlan compacts slices whose entries cross their
// groups (a TPU pool: every sub-slice has the accelerator type, each shape
// its own topology; the DGX H100 slices) with each candidate kind alone
// and with both: the result is never larger than either alone, and on the
// TPU pool the disjoint classes beat the closed sets, which repeat the
// accelerator type in every shape's mixin.
func TestPlanTakesTheBetterPlan(t *testing.T) {
	tpu := examplegen.TPU4x4.Slices()
	inputs := map[string]*api.ResourceSlice{"TPU devices": tpu[len(tpu)-1]}
	for i, s := range examplegen.DGXH100Node.Slices(examplegen.Mixins) {
		inputs["DGX H100 slice "+itoa(uint64(i))] = s
	}
	all := planners
	defer func() { planners = all }()
	size := func(name string, in *api.ResourceSlice, ps ...func(int, []owner) []*group) int {
		planners = ps
		_, st := checkCompact(t, name, in, Options{})
		return st.BytesAfter
	}
	for name, in := range inputs {
		closed, disjoint, both := size(name, in, candidates), size(name, in, classes), size(name, in, all...)
		if both > min(closed, disjoint) {
			t.Errorf("%s: %d bytes, but closed sets alone give %d and classes alone %d", name, both, closed, disjoint)
		}
		if name == "TPU devices" && disjoint >= closed {
			t.Errorf("%s: classes give %d bytes, closed sets %d: the case this test is about is gone", name, disjoint, closed)
		}
	}
}
