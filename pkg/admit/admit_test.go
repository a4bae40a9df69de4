package admit

import (
	"strings"
	"testing"

	"github.com/dractl/dractl/pkg/decode"
)

const devicesSlice = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1-devices
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: %d}
  devices:
  - name: gpu-0-mig-1g
    consumesCounters:
    - counterSet: gpu-0-counters
      counters:
        memory: {value: 10Gi}
`

const countersSlice = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1-counters
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0-counters
    counters:
      memory: {value: 40Gi}
`

func review(t *testing.T, docs ...string) *Report {
	t.Helper()
	objs, err := decode.Bytes("in.yaml", []byte(strings.Join(docs, "---\n")))
	var decodeErrs []*decode.Error
	if err != nil {
		errs, ok := err.(decode.Errors)
		if !ok {
			t.Fatalf("decode: %v", err)
		}
		decodeErrs = errs
	}
	return Review(objs, decodeErrs)
}

// TestReview pins the rules the pipeline adds to its stages': a reference
// an incomplete pool cannot resolve is a warning (KEP-4815 "Validation"
// judges complete pools only), the same reference in a complete pool is an
// error, decode errors count their document as an object, and a problem
// both admission and pool validation find is said once.
func TestReview(t *testing.T) {
	for _, tc := range []struct {
		name                string
		docs                []string
		valid               bool
		errors, warnings    int
		objects, badObjects int
		invalidPools        int
		want                []string // substrings of the problems' lines, in order
	}{{
		name:  "complete pool",
		docs:  []string{strings.Replace(devicesSlice, "%d", "2", 1), countersSlice},
		valid: true, objects: 2,
	}, {
		name:  "incomplete pool: an unresolved counter set is a warning",
		docs:  []string{strings.Replace(devicesSlice, "%d", "2", 1)},
		valid: true, warnings: 2, objects: 1,
		want: []string{
			"warning: pool gpu.example.com/node-1: incomplete: 1 of 2 slices of generation 1 found",
			`warning: pool gpu.example.com/node-1: ResourceSlice node-1-devices (in.yaml#1): spec.devices[0].consumesCounters[0].counterSet: Not found: "gpu-0-counters" (the pool is incomplete`,
		},
	}, {
		name:   "complete pool: the same reference is an error",
		docs:   []string{strings.Replace(devicesSlice, "%d", "1", 1)},
		errors: 1, objects: 1, badObjects: 1, invalidPools: 1,
		want: []string{`pool gpu.example.com/node-1: ResourceSlice node-1-devices (in.yaml#1): spec.devices[0].consumesCounters[0].counterSet: Not found: "gpu-0-counters"`},
	}, {
		name:   "a document that does not decode is an object with an error",
		docs:   []string{"apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: x}\nspec: {driver: 7}\n", countersSlice},
		errors: 1, warnings: 1, objects: 2, badObjects: 1,
		want: []string{"in.yaml#1 ResourceSlice/x: spec.driver", "warning: pool gpu.example.com/node-1: incomplete"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := review(t, tc.docs...)
			s := r.Summary
			if r.Valid != tc.valid || s.Errors != tc.errors || s.Warnings != tc.warnings || s.Objects != tc.objects ||
				s.InvalidObjects != tc.badObjects || s.InvalidPools != tc.invalidPools {
				t.Errorf("valid %v, summary %+v; want valid %v, %d errors, %d warnings, %d objects, %d invalid, %d invalid pools",
					r.Valid, s, tc.valid, tc.errors, tc.warnings, tc.objects, tc.badObjects, tc.invalidPools)
			}
			if len(r.Problems) != len(tc.want) {
				t.Fatalf("%d problems, want %d: %+v", len(r.Problems), len(tc.want), r.Problems)
			}
			for i, p := range r.Problems {
				if !strings.Contains(p.Text, tc.want[i]) {
					t.Errorf("problem %d: %q, want it to contain %q", i, p.Text, tc.want[i])
				}
			}
		})
	}
}
