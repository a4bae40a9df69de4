package api_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
)

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0xa91)) }

// probeNames are looked up in every view besides the effective keys, so
// that "absent from the flattened device means absent from the view" is
// checked for names that exist elsewhere in the slice too.
var probeNames = []api.QualifiedName{"model", "memory", "cores", "attr0", "example.org/family", "never-defined"}

// checkViews holds every view of s against api.Flatten(s), and Flatten
// against testgen's independent eager flattener.
func checkViews(t *testing.T, name string, s *api.ResourceSlice) {
	t.Helper()
	flat, err := api.Flatten(s)
	if err != nil {
		t.Fatalf("%s: Flatten: %v", name, err)
	}
	ref, err := testgen.ReferenceFlatten(s)
	if err != nil {
		t.Fatalf("%s: ReferenceFlatten: %v", name, err)
	}
	if !equality.Semantic.DeepEqual(flat, ref) {
		a, _ := json.Marshal(flat)
		b, _ := json.Marshal(ref)
		t.Fatalf("%s: Flatten disagrees with the reference\n got %s\nwant %s", name, a, b)
	}
	if flat.UsesMixins() {
		t.Fatalf("%s: flattened slice still uses mixins", name)
	}

	ix := api.NewMixinIndex(&s.Spec)
	views := ix.Views(s.Spec.Devices)
	for i := range s.Spec.Devices {
		v, err := ix.Device(&s.Spec.Devices[i])
		if err != nil {
			t.Fatalf("%s: device %d: %v", name, i, err)
		}
		// Views of a whole list resolve each device as Device does.
		if batched, err := views.Device(&s.Spec.Devices[i]); err != nil || !equality.Semantic.DeepEqual(batched, v) {
			t.Fatalf("%s: device %d: Views gives %+v, %v; Device %+v", name, i, batched, err, v)
		}
		fd := &flat.Spec.Devices[i]
		where := fmt.Sprintf("%s: device %s", name, fd.Name)
		checkMap(t, where+" attribute", fd.Attributes, v.Attribute, v.Attributes(), probeNames)
		checkMap(t, where+" capacity", fd.Capacity, v.Capacity, v.Capacities(), probeNames)
		if n := v.NumAttributesAndCapacities(); n != len(fd.Attributes)+len(fd.Capacity) {
			t.Errorf("%s: NumAttributesAndCapacities %d, flattened has %d", where, n, len(fd.Attributes)+len(fd.Capacity))
		}
		if len(v.Consumptions) != len(fd.ConsumesCounters) {
			t.Fatalf("%s: %d consumption views for %d consumptions", where, len(v.Consumptions), len(fd.ConsumesCounters))
		}
		for j, cv := range v.Consumptions {
			fc := fd.ConsumesCounters[j]
			if cv.CounterSet() != fc.CounterSet {
				t.Errorf("%s: consumption %d counter set %q, want %q", where, j, cv.CounterSet(), fc.CounterSet)
			}
			checkMap(t, fmt.Sprintf("%s consumption %d counter", where, j), fc.Counters, cv.Counter, cv.Counters(), counterProbes)
			if cv.NumCounters() != len(fc.Counters) {
				t.Errorf("%s: consumption %d NumCounters %d, want %d", where, j, cv.NumCounters(), len(fc.Counters))
			}
		}
		if got := v.Flatten(); !equality.Semantic.DeepEqual(got, *fd) {
			t.Errorf("%s: DeviceView.Flatten differs from the device in Flatten(slice)", where)
		}
	}
	for i := range s.Spec.SharedCounters {
		v, err := ix.CounterSet(&s.Spec.SharedCounters[i])
		if err != nil {
			t.Fatalf("%s: counter set %d: %v", name, i, err)
		}
		fc := flat.Spec.SharedCounters[i]
		if v.Name() != fc.Name {
			t.Errorf("%s: counter set view name %q, want %q", name, v.Name(), fc.Name)
		}
		checkMap(t, name+" counter set "+fc.Name, fc.Counters, v.Counter, v.Counters(), counterProbes)
		if v.NumCounters() != len(fc.Counters) {
			t.Errorf("%s: counter set %s NumCounters %d, want %d", name, fc.Name, v.NumCounters(), len(fc.Counters))
		}
	}
}

var counterProbes = []string{"memory", "cores", "memory-slice-0", "never-defined"}

// checkMap holds a view's point look-up and iterator against the flattened
// map: every key yields the flattened value, each effective key is yielded
// exactly once, and keys missing from the flattened map are missing from
// the view.
func checkMap[K comparable, V any](t *testing.T, where string, want map[K]V, get func(K) (V, bool), all func(func(K, V) bool), probes []K) {
	t.Helper()
	for k, w := range want {
		g, ok := get(k)
		if !ok || !equality.Semantic.DeepEqual(g, w) {
			t.Errorf("%s %v: view has %v (present %v), flattened %v", where, k, g, ok, w)
		}
	}
	seen := map[K]bool{}
	for k, g := range all {
		if seen[k] {
			t.Errorf("%s %v: iterated twice", where, k)
		}
		seen[k] = true
		if w, ok := want[k]; !ok || !equality.Semantic.DeepEqual(g, w) {
			t.Errorf("%s %v: iterator yields %v, flattened has %v (present %v)", where, k, g, w, ok)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%s: iterator yields %d keys, flattened has %d", where, len(seen), len(want))
	}
	for _, k := range probes {
		if _, in := want[k]; in {
			continue
		}
		if g, ok := get(k); ok {
			t.Errorf("%s %v: absent from the flattened map but the view has %v", where, k, g)
		}
	}
}

func TestViewsAgreeWithFlattenRandom(t *testing.T) {
	for seed := range uint64(500) {
		checkViews(t, fmt.Sprintf("seed %d", seed), testgen.Slice(rng(seed), testgen.Options{Mixins: testgen.MixinsAlways, Layout: testgen.LayoutCombined}))
	}
	for seed := range uint64(200) {
		checkViews(t, fmt.Sprintf("random seed %d", seed), testgen.Slice(rng(seed), testgen.Options{}))
	}
}

func FuzzViewsAgreeWithFlatten(f *testing.F) {
	f.Add(uint64(1), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, knobs uint8) {
		opts := testgen.Options{MaxDevices: 1 + int(knobs&31), Layout: testgen.Layout(knobs >> 6), Mixins: testgen.MixinsAlways}
		checkViews(t, "fuzz", testgen.Slice(rng(seed), opts))
	})
}

func ia(v int64) api.DeviceAttribute  { return api.DeviceAttribute{IntValue: ptr.To(v)} }
func sa(v string) api.DeviceAttribute { return api.DeviceAttribute{StringValue: ptr.To(v)} }
func qc(v string) api.DeviceCapacity  { return api.DeviceCapacity{Value: resource.MustParse(v)} }
func cnt(v string) api.Counter        { return api.Counter{Value: resource.MustParse(v)} }

// Handwritten shapes that random slices hit only by luck: empty mixins,
// mixins that define only capacities, a device whose own map is empty but
// non-nil, a key shadowed by every later source, duplicate includes.
func TestViewsAgreeWithFlattenHandwritten(t *testing.T) {
	s := &api.ResourceSlice{Spec: api.ResourceSliceSpec{
		Driver: "d", Pool: api.ResourcePool{Name: "p"},
		Mixins: &api.ResourceSliceMixins{
			Device: []api.DeviceMixin{
				{Name: "empty"},
				{Name: "caps", Capacity: map[api.QualifiedName]api.DeviceCapacity{"memory": qc("1Gi"), "cores": qc("4")}},
				{Name: "a", Attributes: map[api.QualifiedName]api.DeviceAttribute{"x": ia(1), "y": ia(1), "z": ia(1)}},
				{Name: "b", Attributes: map[api.QualifiedName]api.DeviceAttribute{"x": ia(2), "y": ia(2)}, Capacity: map[api.QualifiedName]api.DeviceCapacity{"memory": qc("2Gi")}},
			},
			DeviceCounterConsumption: []api.DeviceCounterConsumptionMixin{
				{Name: "c1", Counters: map[string]api.Counter{"memory": cnt("1Gi"), "cores": cnt("1")}},
				{Name: "c2", Counters: map[string]api.Counter{"cores": cnt("2")}},
			},
			CounterSet: []api.CounterSetMixin{
				{Name: "s1", Counters: map[string]api.Counter{"memory": cnt("8Gi"), "cores": cnt("8")}},
			},
		},
		SharedCounters: []api.CounterSet{
			{Name: "only-mixin", Includes: []string{"s1"}},
			{Name: "override", Includes: []string{"s1"}, Counters: map[string]api.Counter{"cores": cnt("16")}},
			{Name: "plain", Counters: map[string]api.Counter{"memory": cnt("1")}},
		},
		Devices: []api.Device{
			{Name: "none"},
			{Name: "empty-own", Attributes: map[api.QualifiedName]api.DeviceAttribute{}, Includes: []string{"empty"}},
			{Name: "all", Includes: []string{"empty", "caps", "a", "b"}, Attributes: map[api.QualifiedName]api.DeviceAttribute{"x": ia(3)}},
			{Name: "twice", Includes: []string{"b", "a", "b"}},
			{Name: "consumer", ConsumesCounters: []api.DeviceCounterConsumption{
				{CounterSet: "only-mixin", Includes: []string{"c1", "c2"}},
				{CounterSet: "override", Includes: []string{"c2", "c1"}, Counters: map[string]api.Counter{"memory": cnt("3Gi")}},
			}},
		},
	}}
	checkViews(t, "handwritten", s)
}

// Views of a list resolve each device as Device does, also when an
// include names no mixin, and also for more devices than they were made
// for.
func TestDeviceViewsAgreeWithDevice(t *testing.T) {
	spec := &api.ResourceSliceSpec{
		Mixins: &api.ResourceSliceMixins{DeviceCounterConsumption: []api.DeviceCounterConsumptionMixin{{Name: "one",
			Counters: map[string]api.Counter{"memory": {Value: resource.MustParse("1Gi")}}}}},
		Devices: []api.Device{
			{Name: "a", ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "s", Includes: []string{"one"}}}},
			{Name: "b", ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "s"}, {CounterSet: "t", Includes: []string{"none"}}}},
			{Name: "c"},
			{Name: "d", ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "s"}, {CounterSet: "t", Includes: []string{"one"}}}},
		},
	}
	ix := api.NewMixinIndex(spec)
	views := ix.Views(spec.Devices[:2])
	for i := range spec.Devices {
		d := &spec.Devices[i]
		want, wantErr := ix.Device(d)
		got, err := views.Device(d)
		if !equality.Semantic.DeepEqual(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("device %s: Views gives %+v, %v; Device %+v, %v", d.Name, got, err, want, wantErr)
		}
	}
	if _, err := ix.Device(&spec.Devices[1]); err == nil {
		t.Error("an include of no mixin resolved")
	}
}
