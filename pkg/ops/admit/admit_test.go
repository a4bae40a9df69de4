package admit

import (
	"strings"
	"testing"

	"github.com/dractl/dractl/pkg/core/decode"
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

// TestAdminAccessNamespace: admin access to devices is refused in a
// namespace of the input without the label resource.kubernetes.io/admin-access:
// "true", as kube-apiserver refuses it on create, for a claim's requests,
// a template's, and an allocation in a claim's status; a namespace the
// input does not hold is a warning that it could not be checked.
func TestAdminAccessNamespace(t *testing.T) {
	ns := func(labels string) string {
		return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n" + labels
	}
	const claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: ns}\nspec:\n  devices:\n    requests:\n    - {name: a, exactly: {deviceClassName: gpu}}\n    - {name: b, exactly: {deviceClassName: gpu, adminAccess: %s}}\n"
	const template = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t, namespace: ns}\nspec: {spec: {devices: {requests: [{name: a, exactly: {deviceClassName: gpu, adminAccess: true}}]}}}\n"
	const allocated = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: ns}\nspec: {devices: {requests: [{name: a, exactly: {deviceClassName: gpu}}]}}\nstatus:\n  allocation:\n    devices:\n      results:\n      - {request: a, driver: gpu.example.com, pool: p, device: d, adminAccess: true}\n"
	for _, tc := range []struct {
		name        string
		docs        []string
		field       string // of the error or warning
		err, warned bool
	}{
		{"labelled namespace", []string{ns("  labels: {resource.kubernetes.io/admin-access: \"true\"}\n"), strings.Replace(claim, "%s", "true", 1)}, "", false, false},
		{"namespace without the label", []string{ns(""), strings.Replace(claim, "%s", "true", 1)}, "spec.devices.requests[1].adminAccess", true, false},
		{"label not \"true\"", []string{ns("  labels: {resource.kubernetes.io/admin-access: \"yes\"}\n"), strings.Replace(claim, "%s", "true", 1)}, "spec.devices.requests[1].adminAccess", true, false},
		{"no admin access asked", []string{ns(""), strings.Replace(claim, "%s", "false", 1)}, "", false, false},
		{"template", []string{ns(""), template}, "spec.devices.requests[0].adminAccess", true, false},
		{"allocation in the status", []string{ns(""), allocated}, "status.allocation.devices.results[0].adminAccess", true, false},
		{"namespace not in the input", []string{strings.Replace(claim, "%s", "true", 1)}, "spec.devices.requests[1].adminAccess", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := review(t, tc.docs...)
			var errs, warns []Problem
			for _, p := range r.Problems {
				switch {
				case p.Severity == "error":
					errs = append(errs, p)
				case p.Field == tc.field:
					warns = append(warns, p)
				}
			}
			if tc.err != (len(errs) == 1) || len(errs) > 1 || tc.err && (errs[0].Field != tc.field || errs[0].Type != "FieldValueForbidden" || !strings.Contains(errs[0].Message, "Namespace ns")) {
				t.Errorf("errors %+v, want one at %q: %v", errs, tc.field, tc.err)
			}
			if tc.warned != (len(warns) == 1) || tc.warned && !strings.Contains(warns[0].Message, "not in the input") {
				t.Errorf("warnings %+v, want one at %q: %v", warns, tc.field, tc.warned)
			}
		})
	}
}
