package testgen

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
)

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// checkLimits asserts the v1 and KEP-5234 limits the package promises.
func checkLimits(t *testing.T, seed uint64, s *api.ResourceSlice) {
	t.Helper()
	flat, err := api.Flatten(s)
	if err != nil {
		t.Fatalf("seed %d: generated slice does not flatten: %v", seed, err)
	}
	counters := len(s.Spec.SharedCounters) > 0
	taints := false
	for _, d := range flat.Spec.Devices {
		if n := len(d.Attributes) + len(d.Capacity); n > maxEntriesV1 {
			t.Errorf("seed %d: device %s has %d attributes+capacities", seed, d.Name, n)
		}
		if len(d.ConsumesCounters) > 0 {
			counters = true
		}
		if len(d.Taints) > 0 {
			taints = true
		}
		if len(d.Taints) > maxTaintsPerDevice {
			t.Errorf("seed %d: device %s has %d taints", seed, d.Name, len(d.Taints))
		}
		limit := maxConsumptionsV1
		if s.UsesMixins() {
			limit = 4
		}
		if len(d.ConsumesCounters) > limit {
			t.Errorf("seed %d: device %s has %d consumptions", seed, d.Name, len(d.ConsumesCounters))
		}
		seen := map[string]bool{}
		for _, c := range d.ConsumesCounters {
			if seen[c.CounterSet] {
				t.Errorf("seed %d: device %s consumes twice from %s", seed, d.Name, c.CounterSet)
			}
			seen[c.CounterSet] = true
			if len(c.Counters) == 0 {
				t.Errorf("seed %d: device %s consumes nothing from %s", seed, d.Name, c.CounterSet)
			}
		}
	}
	if (counters || taints) && len(s.Spec.Devices) > maxDevicesWithCounters {
		t.Errorf("seed %d: %d devices with counters or taints", seed, len(s.Spec.Devices))
	}
	if len(s.Spec.SharedCounters) > maxCounterSetsV1 {
		t.Errorf("seed %d: %d counter sets", seed, len(s.Spec.SharedCounters))
	}
	for _, d := range s.Spec.Devices {
		if len(d.Includes) > 8 {
			t.Errorf("seed %d: device %s has %d includes", seed, d.Name, len(d.Includes))
		}
	}
}

func TestSliceWithinLimits(t *testing.T) {
	for seed := range uint64(500) {
		checkLimits(t, seed, Slice(rng(seed), Options{}))
		checkLimits(t, seed, Slice(rng(seed), Options{MaxDevices: 128, Mixins: MixinsAlways}))
	}
}

func TestSliceDeterministic(t *testing.T) {
	for seed := range uint64(50) {
		a, _ := json.Marshal(Slice(rng(seed), Options{}))
		b, _ := json.Marshal(Slice(rng(seed), Options{}))
		if string(a) != string(b) {
			t.Fatalf("seed %d: same seed gave different slices", seed)
		}
	}
}

func TestMixinModes(t *testing.T) {
	for seed := range uint64(100) {
		if s := Slice(rng(seed), Options{Mixins: MixinsNever}); s.UsesMixins() {
			t.Fatalf("seed %d: MixinsNever produced mixins", seed)
		}
		if s := Slice(rng(seed), Options{Mixins: MixinsAlways}); !s.UsesMixins() {
			t.Fatalf("seed %d: MixinsAlways produced no mixins", seed)
		}
	}
}

// TestPrecedenceIsExercised makes sure the generator produces the overlaps
// that make precedence observable: a key defined by two included mixins
// with different values, and a device overriding an included key.
func TestPrecedenceIsExercised(t *testing.T) {
	var mixinVsMixin, deviceVsMixin, setVsMixin int
	for seed := range uint64(200) {
		s := Slice(rng(seed), Options{Mixins: MixinsAlways, Layout: LayoutCombined})
		ix := api.NewMixinIndex(&s.Spec)
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			owners := map[api.QualifiedName]string{}
			for _, n := range d.Includes {
				m, ok := ix.DeviceMixin(n)
				if !ok {
					t.Fatalf("seed %d: unresolved include %q", seed, n)
				}
				for k, v := range m.Attributes {
					if prev, ok := owners[k]; ok && prev != v.String() {
						mixinVsMixin++
					}
					owners[k] = v.String()
				}
			}
			for k, v := range d.Attributes {
				if prev, ok := owners[k]; ok && prev != v.String() {
					deviceVsMixin++
				}
			}
		}
		for _, cs := range s.Spec.SharedCounters {
			for _, n := range cs.Includes {
				m, _ := ix.CounterSetMixin(n)
				for k := range m.Counters {
					if _, ok := cs.Counters[k]; ok {
						setVsMixin++
					}
				}
			}
		}
	}
	if mixinVsMixin < 10 || deviceVsMixin < 10 || setVsMixin < 10 {
		t.Errorf("too few overlaps: mixin/mixin %d, device/mixin %d, set/mixin %d", mixinVsMixin, deviceVsMixin, setVsMixin)
	}
}

func TestPoolConsistent(t *testing.T) {
	for seed := range uint64(200) {
		slices := Pool(rng(seed), Options{})
		sets := map[string]bool{}
		names := map[string]bool{}
		for _, s := range slices {
			checkLimits(t, seed, s)
			if s.Spec.Pool != slices[0].Spec.Pool {
				t.Fatalf("seed %d: pool differs between slices: %+v vs %+v", seed, s.Spec.Pool, slices[0].Spec.Pool)
			}
			if int(s.Spec.Pool.ResourceSliceCount) != len(slices) {
				t.Fatalf("seed %d: resourceSliceCount %d, %d slices", seed, s.Spec.Pool.ResourceSliceCount, len(slices))
			}
			if len(s.Spec.SharedCounters) > 0 && len(s.Spec.Devices) > 0 {
				t.Fatalf("seed %d: slice %s mixes counter sets and devices", seed, s.Name)
			}
			for _, cs := range s.Spec.SharedCounters {
				sets[cs.Name] = true
			}
		}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				if names[d.Name] {
					t.Fatalf("seed %d: device name %s repeats in the pool", seed, d.Name)
				}
				names[d.Name] = true
				for _, c := range d.ConsumesCounters {
					if !sets[c.CounterSet] {
						t.Fatalf("seed %d: device %s consumes from unknown set %s", seed, d.Name, c.CounterSet)
					}
				}
			}
		}
	}
}
