package clusterbench

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/validation"
)

// pipeline is what `dractl validate` does with a cluster's slices.
func pipeline(tb testing.TB, data []byte) []*pool.Pool {
	objs, err := decode.Bytes("cluster.yaml", data)
	if err != nil {
		tb.Fatal(err)
	}
	slices := Slices(objs)
	// Admission validation is per object and independent, so it is spread
	// over the cores like decoding is.
	for i, errs := range validation.ResourceSlices(slices) {
		if len(errs) != 0 {
			tb.Fatalf("slice %d: %d validation errors: %v", i, len(errs), errs)
		}
	}
	pools := pool.Assemble(slices)
	for i, err := range pool.ValidateAll(pools) {
		if !pools[i].Complete() {
			tb.Fatalf("pool %s incomplete", pools[i].ID)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	return pools
}

var forms = []examplegen.Form{examplegen.Flat, examplegen.Mixins}

// BenchmarkCluster decodes, validates and assembles 1,000 DGX H100 nodes.
// The budget is 2 s per operation on a 2-core machine.
func BenchmarkCluster(b *testing.B) {
	for _, form := range forms {
		for _, format := range []string{"json", "yaml"} {
			b.Run(fmt.Sprintf("form=%s/format=%s", form, format), func(b *testing.B) {
				// Built here, so that running one form (-bench with its
				// name) builds only its manifest.
				data, devices, err := Manifest(1000, form, format)
				if err != nil {
					b.Fatal(err)
				}
				// Building the manifest leaves gigabytes of garbage;
				// collecting it is no part of the pipeline's cost.
				runtime.GC()
				b.ResetTimer()
				b.SetBytes(int64(len(data)))
				b.ReportMetric(float64(devices), "devices")
				cpu0 := coretest.CPUTime()
				for b.Loop() {
					pipeline(b, data)
				}
				// On a shared machine the CPU time per operation varies far
				// less than the wall time.
				b.ReportMetric(float64(coretest.CPUTime()-cpu0)/1e9/float64(b.N), "cpu-s/op")
			})
		}
	}
}

// BenchmarkDecodedMemory reports the live heap that the decoded, assembled
// pools of 1,000 nodes hold, in each form: mixins must be smaller.
func BenchmarkDecodedMemory(b *testing.B) {
	for _, form := range forms {
		data, _, err := Manifest(1000, form, "json")
		if err != nil {
			b.Fatal(err)
		}
		b.Run("form="+form.String(), func(b *testing.B) {
			var live uint64
			for b.Loop() {
				live = LiveHeap(func() any { return pipeline(b, data) })
			}
			b.ReportMetric(float64(live)/(1<<20), "MiB-live")
		})
	}
}

// TestMixinFormUsesLessMemory keeps the memory claim honest at a scale
// that runs in the normal test suite.
func TestMixinFormUsesLessMemory(t *testing.T) {
	live := map[examplegen.Form]uint64{}
	for _, form := range forms {
		data, devices, err := Manifest(20, form, "json")
		if err != nil {
			t.Fatal(err)
		}
		if devices != 20*152 {
			t.Fatalf("%s form: %d devices, want %d", form, devices, 20*152)
		}
		live[form] = LiveHeap(func() any { return pipeline(t, data) })
	}
	if live[examplegen.Mixins] >= live[examplegen.Flat] {
		t.Errorf("decoded mixin form holds %d bytes, flat form %d: mixins should be smaller", live[examplegen.Mixins], live[examplegen.Flat])
	}
	t.Logf("live heap for 20 nodes: flat %d KiB, mixins %d KiB", live[examplegen.Flat]>>10, live[examplegen.Mixins]>>10)
}
