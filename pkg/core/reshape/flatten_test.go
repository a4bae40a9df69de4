package reshape_test

import (
	"fmt"
	"testing"

	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/reshape"
	"github.com/dractl/dractl/pkg/core/validation"
)

// A pool at KEP-5234's limits, flattened and split, is a pool of v1
// slices that v1 admission and pool validation accept, with every device
// and counter set once, in order, under names that follow from the
// input's, and a resourceSliceCount that counts the pieces.
func TestMixinPoolAtLimitsBecomesValidV1(t *testing.T) {
	in := testgen.MixinPool128("gpu.example.com", "p", "node-1")
	for _, s := range in {
		if errs := validation.ResourceSlice(s); len(errs) > 0 {
			t.Fatalf("input %s: %v", s.Name, errs)
		}
		f, err := api.Flatten(s)
		if err != nil {
			t.Fatal(err)
		}
		if errs := validation.ResourceSlice(f); len(errs) == 0 {
			t.Fatalf("input %s flattened whole is valid v1: the test does not test the split", s.Name)
		}
	}
	pieces := make([][]*api.ResourceSlice, len(in))
	var out []*api.ResourceSlice
	for i, s := range in {
		var err error
		if pieces[i], err = reshape.ForV1(s); err != nil {
			t.Fatal(err)
		}
		out = append(out, pieces[i]...)
	}
	counts := reshape.Count(in, pieces)
	var names, devs, sets []string
	for _, p := range out {
		p.Spec.Pool.ResourceSliceCount = counts[reshape.KeyOf(p)]
		if p.UsesMixins() {
			t.Errorf("%s still uses mixins", p.Name)
		}
		if errs := validation.ResourceSlice(p); len(errs) > 0 {
			t.Errorf("%s: %v", p.Name, errs)
		}
		names = append(names, p.Name)
		for _, d := range p.Spec.Devices {
			devs = append(devs, d.Name)
		}
		for _, c := range p.Spec.SharedCounters {
			sets = append(sets, c.Name)
		}
	}
	wantNames := []string{"p-counters-0", "p-counters-1", "p-counters-2", "p-counters-3", "p-devices-0", "p-devices-1"}
	if fmt.Sprint(names) != fmt.Sprint(wantNames) {
		t.Errorf("names %v, want %v", names, wantNames)
	}
	if got := counts[reshape.PoolKey{Driver: "gpu.example.com", Pool: "p", Generation: 1}]; got != int64(len(wantNames)) {
		t.Errorf("resourceSliceCount %d, want %d", got, len(wantNames))
	}
	for i := range 128 {
		if devs[i] != fmt.Sprintf("dev-%d", i) {
			t.Fatalf("device %d is %s: order or count changed", i, devs[i])
		}
	}
	if len(devs) != 128 || len(sets) != 32 {
		t.Errorf("%d devices and %d counter sets, want 128 and 32", len(devs), len(sets))
	}
	ps := pool.Assemble(out)
	if len(ps) != 1 || !ps[0].Complete() {
		t.Fatalf("not one complete pool: %v", ps)
	}
	if err := ps[0].Validate(); err != nil {
		t.Error(err)
	}
	// Splitting again gives the same names: a republished pool replaces
	// its slices rather than adding new ones.
	again, _ := reshape.ForV1(in[1])
	for i := range again {
		if again[i].Name != pieces[1][i].Name {
			t.Errorf("piece %d named %s, then %s", i, pieces[1][i].Name, again[i].Name)
		}
	}
}
