package live

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
)

// dgxSlices encodes the flattened slices of n DGX H100 nodes as the API
// server sends them.
func dgxSlices(b *testing.B, n int) [][]byte {
	objs, err := decode.Paths([]string{filepath.Join("..", "..", "..", "examples", "dgx-h100-mixins", "resourceslices.yaml")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	for i := range n {
		node := fmt.Sprintf("dgx-%04d", i)
		for _, s := range decode.Group(objs).Slices {
			v1, err := api.ToUpstream(s)
			if err != nil {
				b.Fatal(err)
			}
			v1.Name = strings.Replace(v1.Name, "dgx-h100-node", node, 1)
			v1.Spec.Pool.Name, v1.Spec.NodeName = node, &node
			raw, err := v1.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, raw)
		}
	}
	return out
}

// What decoding a list of 100 DGX H100 nodes' slices costs: every field
// with the generated code (what AllFields does), and for pool checks
// (PoolFields), side by side.
func BenchmarkDecodeDGXSlices(b *testing.B) {
	raw := dgxSlices(b, 100)
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, r := range raw {
				var s resourcev1.ResourceSlice
				if err := s.Unmarshal(r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("pool-fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d := newPoolDecoder()
			for _, r := range raw {
				if _, err := d.decode(r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
