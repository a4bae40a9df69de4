package clusterbench

import (
	"bytes"
	"fmt"

	"github.com/dractl/dractl/internal/examplegen"
	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/decode"
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
	if err := decode.Encode(&buf, objs, format); err != nil {
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
