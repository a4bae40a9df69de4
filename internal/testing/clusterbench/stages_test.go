package clusterbench

import (
	"testing"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/validation"
)

// BenchmarkStages times decoding and admission validation of 1,000 nodes
// in mixin form separately, for profiling one stage at a time.
func BenchmarkStages(b *testing.B) {
	data, _, err := Manifest(1000, examplegen.Mixins, "json")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decode.Bytes("cluster.json", data); err != nil {
				b.Fatal(err)
			}
		}
	})
	objs, err := decode.Bytes("cluster.json", data)
	if err != nil {
		b.Fatal(err)
	}
	slices := Slices(objs)
	b.Run("validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, errs := range validation.ResourceSlices(slices) {
				if len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		}
	})
}
