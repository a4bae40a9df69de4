package validation_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
	. "github.com/dractl/dractl/pkg/core/validation"
)

// TestResourceSlicesMatchesResourceSlice: the parallel entry point gives,
// at each index, exactly what ResourceSlice gives for that slice, for
// valid and broken slices alike (errors with their full paths).
func TestResourceSlicesMatchesResourceSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var slices []*api.ResourceSlice
	for i := range 200 {
		s := testgen.Slice(r, testgen.Options{Mixins: testgen.MixinsRandom})
		// Break some of them in ways that reach the lazily built paths.
		switch i % 5 {
		case 1:
			for j := range s.Spec.Devices {
				d := &s.Spec.Devices[j]
				d.Name = "Bad_Name"
				d.Includes = append(d.Includes, "missing")
				for k := range d.ConsumesCounters {
					d.ConsumesCounters[k].CounterSet = "-x"
					d.ConsumesCounters[k].Includes = []string{""}
				}
			}
		case 2:
			for j := range s.Spec.Devices {
				d := &s.Spec.Devices[j]
				if d.Attributes == nil {
					d.Attributes = map[api.QualifiedName]api.DeviceAttribute{}
				}
				bad := "not-semver"
				d.Attributes["bad/"] = api.DeviceAttribute{VersionValue: &bad}
				d.Attributes["x"] = api.DeviceAttribute{}
			}
		}
		slices = append(slices, s, nil)
	}
	slices = append(slices, migSlice(false), migSlice(true))
	got := ResourceSlices(slices)
	if len(got) != len(slices) {
		t.Fatalf("%d results for %d slices", len(got), len(slices))
	}
	broken := 0
	for i, s := range slices {
		want := ResourceSlice(s)
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("slice %d: ResourceSlices gives\n%v\nResourceSlice gives\n%v", i, got[i], want)
		}
		if s != nil && len(want) > 0 {
			broken++
		}
	}
	if broken < 80 {
		t.Errorf("only %d broken slices; the test should exercise error paths", broken)
	}
}
