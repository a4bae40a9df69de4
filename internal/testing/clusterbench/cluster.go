package clusterbench

import (
	"bytes"
	"fmt"
	"runtime"

	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/ops/manifest"
)

// Manifest returns the ResourceSlices of nodes DGX H100 nodes (8 GPUs, 152
// MIG devices each) in the given form, as one YAML or JSON stream.
func Manifest(nodes int, form examplegen.Form, format string) ([]byte, int, error) {
	var objs []any
	devices := 0
	for i := range nodes {
		n := examplegen.DGXH100Node
		n.Node = fmt.Sprintf("dgx-%04d", i)
		for _, s := range n.Slices(form) {
			devices += len(s.Spec.Devices)
			objs = append(objs, s)
		}
	}
	var buf bytes.Buffer
	if err := manifest.Write(&buf, objs, format); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), devices, nil
}

// Slices extracts the decoded ResourceSlices.
func Slices(objs []decode.Object) []*api.ResourceSlice {
	out := make([]*api.ResourceSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.Obj.(*api.ResourceSlice); ok {
			out = append(out, s)
		}
	}
	return out
}

// LiveHeap returns how much more heap is live while build's result is
// held: the memory a decoded form really costs, after garbage collection.
func LiveHeap(build func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}
