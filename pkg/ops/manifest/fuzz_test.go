package manifest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"k8s.io/apimachinery/pkg/api/equality"
)

// FuzzDecodeWrite checks that any input either decodes or fails with
// decode.Errors, never panics, and that every decoded ResourceSlice
// survives Write and a second decode in both formats unchanged. Its seeds
// are the decoder's test files.
func FuzzDecodeWrite(f *testing.F) {
	files, _ := filepath.Glob("../../core/decode/testdata/*")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		sliceHead + "  devices:\n  - name: a\n    capacity: {m: {value: 1Gi}}\n    taints: [{key: k, effect: NoSchedule, timeAdded: '2024-01-01T00:00:00.5Z'}]\n",
		sliceHead + "  mixins: {counterSet: [{name: m, counters: {c: {value: '1'}}}]}\n  sharedCounters: [{name: s, includes: [m]}]\n",
		"apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Node, metadata: {name: x}}]\n",
		`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s","managedFields":[{"fieldsV1":{"f:spec":{}}}]},"spec":{}}`,
		"{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"s\",\"labels\":{\"k\":\"\x7f\u0085\"}},\"spec\":{}}",
		"a: &a [*a]\n",
		"---\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := decode.Bytes("fuzz", data)
		if err != nil {
			var es decode.Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error is not a non-empty Errors: %#v", err)
			}
			for _, e := range es {
				if e.Detail == "" || e.Source.File != "fuzz" {
					t.Fatalf("malformed error %#v", e)
				}
			}
		}
		for _, o := range objs {
			s, ok := o.Obj.(*api.ResourceSlice)
			if !ok {
				continue
			}
			for _, format := range []string{"yaml", "json"} {
				var buf bytes.Buffer
				if err := Write(&buf, []any{s}, format); err != nil {
					t.Fatalf("encode %s: %v", format, err)
				}
				again, err := decode.Bytes("again", buf.Bytes())
				if err != nil {
					t.Fatalf("re-decode %s: %v\n%s", format, err, buf.String())
				}
				if len(again) != 1 || !equality.Semantic.DeepEqual(s, again[0].Obj) {
					t.Fatalf("%s round trip changed the slice:\n%s", format, buf.String())
				}
			}
		}
	})
}

// sliceHead starts a ResourceSlice document; seeds append its spec.
const sliceHead = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: gpu-node-0
spec:
  driver: gpu.example.com
  nodeName: node-0
  pool: {name: node-0, generation: 1, resourceSliceCount: 1}
`
