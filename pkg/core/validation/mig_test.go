package validation_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/driver/mig"
)

// These tests use pkg/driver/mig's tables and generator, which import this
// package for its limits; so they live in the external test package.

// migSlice is the first device slice of a DGX H100 node (8 GPUs) as
// pkg/driver/mig publishes it: as many GPUs' devices (the whole GPU and its 18
// MIG placements, each consuming from its GPU's counter set in another
// slice of the pool) as the form's per-slice limit allows. With mixins the
// shared attributes and consumptions move into mixins (KEP-5234).
func migSlice(mixins bool) *api.ResourceSlice {
	form := mig.Flat
	if mixins {
		form = mig.Mixins
	}
	n := mig.Node{Driver: "gpu.example.com", Node: "node-1", Model: &mig.H100, GPUs: 8,
		DriverVersion: "550.54.15", CUDADriverVersion: "12.4.0"}
	for _, s := range n.Slices(form) {
		if len(s.Spec.Devices) > 0 {
			return s
		}
	}
	panic("pkg/driver/mig published no devices")
}

// FuzzResourceSlice feeds arbitrary JSON through validation: whatever
// decodes must be validated without a panic, and validating twice must give
// the same answer (validation must neither mutate nor depend on map order).
func FuzzResourceSlice(f *testing.F) {
	seeds := []*api.ResourceSlice{validation.PlainSlice(), validation.CountersSlice(), validation.MixinSlice(), validation.MixinCounterSlice(), migSlice(false), migSlice(true)}
	for _, s := range seeds {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"spec":{"devices":[{"name":"a","includes":["x"],"consumesCounters":[{"counterSet":"","includes":[""]}],
		"capacity":{"m":{"value":"1","requestPolicy":{"default":"1","validRange":{"min":"1e-900","step":"1e900"}}}}}],
		"mixins":{"device":[{"name":"x"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s api.ResourceSlice
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		first := validation.ResourceSlice(&s)
		second := validation.ResourceSlice(&s)
		if len(first) != len(second) {
			t.Fatalf("validation not repeatable: %d then %d errors", len(first), len(second))
		}
		for i := range first {
			if first[i].Type != second[i].Type || first[i].Field != second[i].Field {
				t.Fatalf("validation not repeatable at %d: %v then %v", i, first[i], second[i])
			}
		}
	})
}

// TestMIGSliceIsValid: pkg/driver/mig's slices are valid in both forms, and
// devices with counters beyond the flat per-slice limit (KEP-4815
// "Limits") are refused only without mixins, whose limit is the total
// device count (KEP-5234 "Limits").
func TestMIGSliceIsValid(t *testing.T) {
	for _, mixins := range []bool{false, true} {
		s := migSlice(mixins)
		if errs := validation.ResourceSlice(s); len(errs) != 0 {
			t.Fatalf("mixins=%v: %v", mixins, errs)
		}
		limit := validation.MaxDevicesWithAdvancedFeatures
		if mixins {
			limit = validation.MixinMaxDevices
		}
		if len(s.Spec.Devices) > limit || len(s.Spec.Devices)+mig.H100.DevicesPerGPU() <= limit {
			t.Fatalf("mixins=%v: %d devices; the generator should fill a slice up to %d", mixins, len(s.Spec.Devices), limit)
		}
		last := s.Spec.Devices[len(s.Spec.Devices)-1]
		for i := 0; len(s.Spec.Devices) <= validation.MaxDevicesWithAdvancedFeatures; i++ {
			d := *last.DeepCopy()
			d.Name = fmt.Sprintf("extra-%d", i)
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
		errs := validation.ResourceSlice(s)
		if mixins {
			if len(errs) != 0 {
				t.Errorf("mixins: %d devices refused: %v", len(s.Spec.Devices), errs)
			}
			continue
		}
		if len(errs) != 1 || errs[0].Type != field.ErrorTypeTooMany || errs[0].Field != "spec.devices" {
			t.Errorf("flat, %d devices with counters: want too many at spec.devices, got %v", len(s.Spec.Devices), errs)
		}
	}
}

func BenchmarkResourceSliceMIG(b *testing.B) {
	for _, mixins := range []bool{false, true} {
		s := migSlice(mixins)
		b.Run(fmt.Sprintf("mixins=%v", mixins), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if errs := validation.ResourceSlice(s); len(errs) != 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
