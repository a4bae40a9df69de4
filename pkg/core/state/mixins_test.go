package state_test

import (
	"context"
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

// mixinGPU is a node with two GPUs: gpu-0's counter set is written out,
// gpu-1's includes a counter set mixin; each has a whole device and a
// partition, and one partition of gpu-0 takes its counters from a
// consumption mixin. A device with an include that names no mixin sits
// in the same slice.
func mixinGPU(st *state.State, t *testing.T) {
	t.Helper()
	at.Must(t, st.SetMixinSlice(at.Slice("counters").Driver(driver).Pool("node-1").Node("node-1").Count(2).
		Counters("gpu-0", "memory", "40Gi").
		CounterSetMixin("a100", "memory", "40Gi").CounterSetWithIncludes("gpu-1", []string{"a100"}).Obj()))
	at.Must(t, st.SetMixinSlice(at.Slice("devices").Driver(driver).Pool("node-1").Node("node-1").Count(2).
		DeviceMixin("common", "model", "a100").ConsumptionMixin("half", "memory", "20Gi").
		Device(
			at.Device("gpu-0").Consumes("gpu-0", "memory", "40Gi"),
			at.Device("gpu-0-half").ConsumesIncludes("gpu-0", "half"),
			at.Device("gpu-0-tagged").Includes("common").Consumes("gpu-0", "memory", "10Gi"),
			at.Device("gpu-0-typo").Includes("comon").Consumes("gpu-0", "memory", "10Gi"),
			at.Device("gpu-1").Consumes("gpu-1", "memory", "40Gi"),
			at.Device("gpu-1-half").Consumes("gpu-1", "memory", "20Gi"),
		).Obj()))
	at.Must(t, st.SetClass(at.Class("gpu", `device.driver == "`+driver+`"`)))
}

// With DRAResourceSliceMixins off the State, and so every reader of it
// and every allocation, sees only what does not use mixins; with it on,
// only the device whose include names no mixin is left out. The pool
// stays valid either way.
func TestMixinsGate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gates features.Set
		seen  []string
	}{
		{"on", features.All(), []string{"gpu-0", "gpu-0-half", "gpu-0-tagged", "gpu-1", "gpu-1-half"}},
		{"off", features.All().With(features.ResourceSliceMixins, false), []string{"gpu-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := state.New(state.Options{Features: tc.gates})
			mixinGPU(st, t)
			u := st.Snapshot().Usage(pool.ID{Driver: driver, Pool: "node-1"})
			if u.Invalid != nil {
				t.Fatalf("pool invalid: %v", u.Invalid)
			}
			var seen []string
			for _, d := range u.Devices {
				seen = append(seen, d.Device.Name)
			}
			if !slices.Equal(seen, tc.seen) {
				t.Errorf("devices %q, want %q", seen, tc.seen)
			}
			if want := 6 - len(tc.seen); len(u.Dropped) < want {
				t.Errorf("%d dropped entries, want at least %d (every left-out device named): %v", len(u.Dropped), want, u.Dropped)
			}
			// A request for all devices gets exactly the devices seen.
			claim := at.Claim("all").Request(at.Request("gpu", "gpu").All()).Obj()
			at.Must(t, st.SetClaim(claim))
			res, err := st.Snapshot().Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{}).Allocate(context.Background(), at.Node("node-1"))
			if len(tc.seen) > 1 {
				// Overlapping partitions cannot all be allocated together.
				if err == nil {
					t.Fatalf("allocated all of %v, which overlap", tc.seen)
				}
				return
			}
			at.Must(t, err)
			var got []string
			for _, r := range res[0].Devices.Results {
				got = append(got, r.Device)
			}
			if !slices.Equal(got, tc.seen) {
				t.Errorf("allocated %q, want %q", got, tc.seen)
			}
		})
	}
}
