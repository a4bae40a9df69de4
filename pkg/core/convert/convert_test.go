package convert

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// TestPairs converts hand-checked objects: each want is what kube-apiserver
// 1.37 returns at resource.k8s.io/v1 for the object created at the older
// version (before the v1 defaults, which pkg/core/decode applies).
func TestPairs(t *testing.T) {
	cases := []struct {
		name     string
		in       runtime.Object
		inYAML   string
		wantYAML string
		want     runtime.Object
	}{
		{
			name: "v1beta1 slice: basic lifted, empty nodeName and false allNodes unset",
			in:   &resourcev1beta1.ResourceSlice{},
			inYAML: `apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-1
  allNodes: false
  pool: {name: p, generation: 2, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    basic:
      attributes:
        model: {string: A100}
      capacity:
        memory: {value: 40Gi}
      consumesCounters:
      - counterSet: gpu-0-counters
        counters: {memory: {value: 40Gi}}
      taints: [{key: k, value: v, effect: NoSchedule}]
  - name: bare
`,
			want: &resourcev1.ResourceSlice{},
			wantYAML: `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p, generation: 2, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      model: {string: A100}
    capacity:
      memory: {value: 40Gi}
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 40Gi}}
    taints: [{key: k, value: v, effect: NoSchedule}]
  - name: bare
`,
		},
		{
			name: "v1beta1 claim: ExactCount fields move under exactly, with v1beta1 defaults",
			in:   &resourcev1beta1.ResourceClaim{},
			inYAML: `apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: c, namespace: ns}
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.example.com
      selectors: [{cel: {expression: "device.attributes['gpu.example.com'].model == 'A100'"}}]
      adminAccess: false
    - name: all
      deviceClassName: gpu.example.com
      allocationMode: All
    - name: either
      firstAvailable:
      - {name: big, deviceClassName: big.example.com}
      - {name: small, deviceClassName: small.example.com, count: 2}
    constraints: [{requests: [gpu], matchAttribute: gpu.example.com/numa}]
`,
			want: &resourcev1.ResourceClaim{},
			wantYAML: `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ns}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        selectors: [{cel: {expression: "device.attributes['gpu.example.com'].model == 'A100'"}}]
        allocationMode: ExactCount
        count: 1
        adminAccess: false
    - name: all
      exactly: {deviceClassName: gpu.example.com, allocationMode: All}
    - name: either
      firstAvailable:
      - {name: big, deviceClassName: big.example.com, allocationMode: ExactCount, count: 1}
      - {name: small, deviceClassName: small.example.com, allocationMode: ExactCount, count: 2}
    constraints: [{requests: [gpu], matchAttribute: gpu.example.com/numa}]
`,
		},
		{
			// A count without a class still makes an exactly section (which
			// validation rejects), and no v1beta1 default applies to it.
			name: "v1beta1 claim: count without class",
			in:   &resourcev1beta1.ResourceClaim{},
			inYAML: `apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: c}
spec: {devices: {requests: [{name: r, count: 3}]}}
`,
			want: &resourcev1.ResourceClaim{},
			wantYAML: `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec: {devices: {requests: [{name: r, exactly: {count: 3}}]}}
`,
		},
		{
			name: "v1beta1 template",
			in:   &resourcev1beta1.ResourceClaimTemplate{},
			inYAML: `apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: t, namespace: ns}
spec:
  metadata: {labels: {a: b}}
  spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.example.com, count: 2}]}}
`,
			want: &resourcev1.ResourceClaimTemplate{},
			wantYAML: `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: t, namespace: ns}
spec:
  metadata: {labels: {a: b}}
  spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 2}}]}}
`,
		},
		{
			name: "v1beta1 class",
			in:   &resourcev1beta1.DeviceClass{},
			inYAML: `apiVersion: resource.k8s.io/v1beta1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]}
`,
			want: &resourcev1.DeviceClass{},
			wantYAML: `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]}
`,
		},
		{
			name: "v1beta2 claim with status: same shape, v1beta2 defaults",
			in:   &resourcev1beta2.ResourceClaim{},
			inYAML: `apiVersion: resource.k8s.io/v1beta2
kind: ResourceClaim
metadata: {name: c, namespace: ns}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
status:
  allocation:
    devices: {results: [{request: gpu, driver: gpu.example.com, pool: p, device: gpu-0}]}
`,
			want: &resourcev1.ResourceClaim{},
			wantYAML: `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ns}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 1}}]}}
status:
  allocation:
    devices: {results: [{request: gpu, driver: gpu.example.com, pool: p, device: gpu-0}]}
`,
		},
		{
			name: "v1beta2 slice",
			in:   &resourcev1beta2.ResourceSlice{},
			inYAML: `apiVersion: resource.k8s.io/v1beta2
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  allNodes: true
  pool: {name: p, resourceSliceCount: 1}
  sharedCounters: [{name: c, counters: {memory: {value: 1Gi}}}]
`,
			want: &resourcev1.ResourceSlice{},
			wantYAML: `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  allNodes: true
  pool: {name: p, resourceSliceCount: 1}
  sharedCounters: [{name: c, counters: {memory: {value: 1Gi}}}]
`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := yaml.UnmarshalStrict([]byte(tc.inYAML), tc.in); err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict([]byte(tc.wantYAML), tc.want); err != nil {
				t.Fatal(err)
			}
			before, _ := yaml.Marshal(tc.in)
			got, err := UpgradeToV1(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if after, _ := yaml.Marshal(tc.in); string(after) != string(before) {
				t.Errorf("UpgradeToV1 modified its input")
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				g, _ := yaml.Marshal(got)
				w, _ := yaml.Marshal(tc.want)
				t.Errorf("got:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

func TestToV1RejectsOtherTypes(t *testing.T) {
	if _, err := UpgradeToV1(&resourcev1.ResourceSlice{}); err == nil {
		t.Error("UpgradeToV1 accepted a v1 object")
	}
}

// jsonShape lists every JSON path of t with the Go kind (or, for leaf
// structs with their own encoding, the type name) found there.
func jsonShape(t reflect.Type, prefix string, out map[string]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if strings.HasPrefix(t.PkgPath(), "k8s.io/apimachinery/") {
			out[prefix] = t.Name()
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("json"), ",")[0]
			if tag == "-" || !f.IsExported() {
				continue
			}
			if f.Anonymous && tag == "" {
				jsonShape(f.Type, prefix, out)
				continue
			}
			jsonShape(f.Type, prefix+"."+tag, out)
		}
	case reflect.Slice:
		jsonShape(t.Elem(), prefix+"[]", out)
	case reflect.Map:
		jsonShape(t.Elem(), prefix+"{}", out)
	default:
		out[prefix] = t.Kind().String()
	}
}

// TestShapes proves what recode relies on: v1beta2 has exactly v1's JSON
// shape, and v1beta1 has it once a device's "basic" is lifted and a
// request's ExactCount fields are put under "exactly" — the two moves this
// package makes by hand. A field added to either version fails here until
// the conversion handles it.
func TestShapes(t *testing.T) {
	v1beta1Moves := func(p string) string {
		p = strings.Replace(p, ".devices[].basic.", ".devices[].", 1)
		for _, f := range []string{"deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity", "derivedAttributes"} {
			p = strings.Replace(p, ".requests[]."+f, ".requests[].exactly."+f, 1)
		}
		return p
	}
	same := func(p string) string { return p }
	for _, tc := range []struct {
		old, v1 any
		move    func(string) string
	}{
		{resourcev1beta2.ResourceSlice{}, resourcev1.ResourceSlice{}, same},
		{resourcev1beta2.DeviceClass{}, resourcev1.DeviceClass{}, same},
		{resourcev1beta2.ResourceClaim{}, resourcev1.ResourceClaim{}, same},
		{resourcev1beta2.ResourceClaimTemplate{}, resourcev1.ResourceClaimTemplate{}, same},
		{resourcev1beta1.ResourceSlice{}, resourcev1.ResourceSlice{}, v1beta1Moves},
		{resourcev1beta1.DeviceClass{}, resourcev1.DeviceClass{}, v1beta1Moves},
		{resourcev1beta1.ResourceClaim{}, resourcev1.ResourceClaim{}, v1beta1Moves},
		{resourcev1beta1.ResourceClaimTemplate{}, resourcev1.ResourceClaimTemplate{}, v1beta1Moves},
	} {
		oldShape, v1Shape := map[string]string{}, map[string]string{}
		jsonShape(reflect.TypeOf(tc.old), "", oldShape)
		jsonShape(reflect.TypeOf(tc.v1), "", v1Shape)
		moved := map[string]string{}
		for p, k := range oldShape {
			if strings.HasSuffix(p, ".basic") {
				continue
			}
			moved[tc.move(p)] = k
		}
		var diffs []string
		for p, k := range moved {
			if v1Shape[p] != k {
				diffs = append(diffs, p+": "+k+" vs v1 "+v1Shape[p])
			}
		}
		for p, k := range v1Shape {
			if _, ok := moved[p]; !ok {
				diffs = append(diffs, p+": missing vs v1 "+k)
			}
		}
		sort.Strings(diffs)
		if len(diffs) > 0 {
			t.Errorf("%T and %T differ beyond the conversion's moves:\n%s", tc.old, tc.v1, strings.Join(diffs, "\n"))
		}
	}
}
