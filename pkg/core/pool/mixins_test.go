package pool_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
)

// mixinPool is a pool whose counter slice has a plain set, a set that
// includes a mixin and a set whose include names no mixin, and whose
// device slice has a plain device and devices that include device mixins,
// consumption mixins, or consume from each counter set.
func mixinPool() []*api.ResourceSlice {
	cs := counterSlice("counters", 2,
		counterSet("plain", "mem"),
		api.CounterSet{Name: "mixed", Includes: []string{"gpu"}},
		api.CounterSet{Name: "broken", Counters: counters("mem"), Includes: []string{"nope"}},
	)
	cs.Spec.Mixins = &api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{{Name: "gpu", Counters: counters("mem")}}}
	ds := deviceSlice("devices", 2,
		device("flat", ""),
		device("on-plain", "plain", "mem"),
		device("on-mixed", "mixed", "mem"),
		device("on-broken", "broken", "mem"),
		api.Device{Name: "includes", Includes: []string{"attrs"}},
		api.Device{Name: "includes-unknown", Includes: []string{"attrs", "nope"}},
		api.Device{Name: "consumes-via-mixin", ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "plain", Includes: []string{"one-mem"}}}},
	)
	ds.Spec.Mixins = &api.ResourceSliceMixins{
		Device:                   []api.DeviceMixin{{Name: "attrs"}},
		DeviceCounterConsumption: []api.DeviceCounterConsumptionMixin{{Name: "one-mem", Counters: counters("mem")}},
	}
	return []*api.ResourceSlice{cs, ds}
}

func TestResolve(t *testing.T) {
	type dropped struct{ slice, path, detail string }
	for _, tc := range []struct {
		name   string
		in     []*api.ResourceSlice
		mixins bool
		// sets and devices are what is left, in slice order.
		sets, devices []string
		dropped       []dropped
	}{{
		name:    "mixins on: only what does not resolve",
		in:      mixinPool(),
		mixins:  true,
		sets:    []string{"plain", "mixed"},
		devices: []string{"flat", "on-plain", "on-mixed", "includes", "consumes-via-mixin"},
		dropped: []dropped{
			{"counters", "spec.sharedCounters[2].includes[0]", "no such counter set mixin"},
			{"devices", "spec.devices[3].consumesCounters[0].counterSet", "counter set was left out"},
			{"devices", "spec.devices[5].includes[1]", "no such device mixin"},
		},
	}, {
		name:    "mixins off: every user of a mixin and every consumer of a dropped set",
		in:      mixinPool(),
		mixins:  false,
		sets:    []string{"plain"},
		devices: []string{"flat", "on-plain"},
		dropped: []dropped{
			{"counters", "spec.sharedCounters[1].includes", "DRAResourceSliceMixins is disabled"},
			{"counters", "spec.sharedCounters[2].includes", "DRAResourceSliceMixins is disabled"},
			{"devices", "spec.devices[2].consumesCounters[0].counterSet", "counter set was left out"},
			{"devices", "spec.devices[3].consumesCounters[0].counterSet", "counter set was left out"},
			{"devices", "spec.devices[4].includes", "DRAResourceSliceMixins is disabled"},
			{"devices", "spec.devices[5].includes", "DRAResourceSliceMixins is disabled"},
			{"devices", "spec.devices[6].consumesCounters[0].includes", "DRAResourceSliceMixins is disabled"},
		},
	}, {
		name:    "mixins off: a consumer in another generation's slice is judged by its own generation",
		in:      append(mixinPool(), olderDevices()),
		mixins:  false,
		sets:    []string{"plain"},
		devices: []string{"flat", "on-plain"},
	}, {
		name:    "no mixins: nothing changes",
		in:      []*api.ResourceSlice{counterSlice("counters", 2, counterSet("plain", "mem")), deviceSlice("devices", 2, device("a", "plain", "mem"), device("b", "nowhere", "mem"))},
		mixins:  false,
		sets:    []string{"plain"},
		devices: []string{"a", "b"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ps := pool.Assemble(tc.in)
			if len(ps) != 1 {
				t.Fatalf("%d pools, want 1", len(ps))
			}
			p := ps[0]
			r := p.Resolve(tc.mixins)
			var sets, devs []string
			for _, s := range r.Slices {
				for _, cs := range s.Spec.SharedCounters {
					sets = append(sets, cs.Name)
				}
				for _, d := range s.Spec.Devices {
					devs = append(devs, d.Name)
				}
			}
			if !slices.Equal(sets, tc.sets) || !slices.Equal(devs, tc.devices) {
				t.Errorf("kept counter sets %q and devices %q, want %q and %q", sets, devs, tc.sets, tc.devices)
			}
			if tc.dropped != nil {
				if len(r.Dropped) != len(tc.dropped) {
					t.Fatalf("dropped %v, want %d entries", r.Dropped, len(tc.dropped))
				}
				for i, want := range tc.dropped {
					got := r.Dropped[i]
					if got.Slice != want.slice || got.Err.Field != want.path || !strings.Contains(got.Err.Error(), want.detail) {
						t.Errorf("dropped[%d] = %s, want slice %s, path %s, reason containing %q", i, got, want.slice, want.path, want.detail)
					}
				}
			}
			if len(tc.dropped) == 0 && tc.in[0].Spec.Mixins == nil && r != p {
				t.Error("a pool without mixins must be returned as it is")
			}
			// What is left is a valid pool: nothing in it refers to what
			// was dropped.
			if err := r.Validate(); err != nil && tc.mixins {
				t.Errorf("resolved pool is invalid: %v", err)
			}
			// The input is never modified.
			if n := len(tc.in[1].Spec.Devices); n != len(mixinPool()[1].Spec.Devices) && tc.in[0].Spec.Mixins != nil {
				t.Errorf("input slice lost devices: %d left", n)
			}
		})
	}
}

// olderDevices is a slice of an older generation of the same pool whose
// device consumes the set that the newest generation drops; it is
// kept in Older, and judged with its own generation's counter sets (none).
func olderDevices() *api.ResourceSlice {
	s := slice("old-devices", driver, poolName, 0, 1)
	s.Spec.Devices = []api.Device{device("old", "mixed", "mem")}
	return s
}

// TestResolveOlder: generations are resolved each on its own.
func TestResolveOlder(t *testing.T) {
	p := pool.Assemble(append(mixinPool(), olderDevices()))[0]
	r := p.Resolve(false)
	if len(r.Older) != 1 || len(r.Older[0].Spec.Devices) != 1 {
		t.Fatalf("older generation changed: %v", r.Older)
	}
	old := counterSlice("old-counters", 2, api.CounterSet{Name: "mixed", Includes: []string{"gpu"}})
	old.Spec.Pool.Generation = 0
	old.Spec.Mixins = &api.ResourceSliceMixins{CounterSet: []api.CounterSetMixin{{Name: "gpu", Counters: counters("mem")}}}
	p = pool.Assemble(append(mixinPool(), olderDevices(), old))[0]
	r = p.Resolve(false)
	for _, s := range r.Older {
		if s.Name == "old-devices" && len(s.Spec.Devices) != 0 {
			t.Errorf("device of the older generation consumes a set its generation dropped but was kept")
		}
	}
}
