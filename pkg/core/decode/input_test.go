package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

func nodeJSON(name string, indent bool) string {
	if indent {
		return "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Node\",\n  \"metadata\": {\n    \"name\": \"" + name + "\"\n  }\n}"
	}
	return `{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + name + `"}}`
}

func nodeYAML(name string) string {
	return "apiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\n"
}

// genStream builds a stream of Node documents, separators, blanks,
// comments and junk from the choices in seed, numbering nodes so that
// every object is distinct.
func genStream(seed []byte) string {
	var b strings.Builder
	n := 0
	for _, c := range seed {
		switch c % 16 {
		case 0, 1:
			n++
			b.WriteString(nodeJSON(fmt.Sprintf("j%d", n), c%2 == 1))
		case 2, 3:
			n++
			b.WriteString(nodeYAML(fmt.Sprintf("y%d", n)))
		case 4, 5:
			b.WriteString("---\n")
		case 6:
			b.WriteString("--- # comment\n")
		case 7:
			b.WriteString("\n")
		case 8:
			b.WriteString(" ")
		case 9:
			b.WriteString("# comment\n")
		case 10:
			b.WriteString("---x\n")
		case 11:
			b.WriteString("{\n")
		case 12:
			b.WriteString("\t")
		case 13:
			b.WriteString("}\n")
		case 14:
			n++
			b.WriteString(fmt.Sprintf("{apiVersion: v1, kind: Node, metadata: {name: f%d}}\n", n))
		case 15:
			b.WriteString("5\n")
		}
	}
	return b.String()
}

// kubectlNames reads a stream with apimachinery's YAMLOrJSONDecoder, as
// kubectl does, and returns the names of its objects in order; failed is
// set when kubectl would stop with an error (including a document that is
// not an object).
func kubectlNames(data string) (names []string, failed bool) {
	dec := k8syaml.NewYAMLOrJSONDecoder(strings.NewReader(data), 4096)
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return names, false
		}
		if err != nil {
			return names, true
		}
		if v == nil {
			continue // an empty document
		}
		m, ok := v.(map[string]any)
		if !ok {
			return names, true
		}
		if m["apiVersion"] == nil || m["kind"] == nil {
			return names, true // kubectl: Object 'Kind' is missing
		}
		meta, _ := m["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		names = append(names, name)
	}
}

func dractlNames(t testing.TB, data string) (names []string, failed, stricter bool) {
	objs, err := Bytes("s", []byte(data))
	for _, o := range objs {
		names = append(names, o.Name)
	}
	// A stream without a document is dractl's error, not the splitter's:
	// kubectl's decoder reads nothing from it, as dractl's does.
	var errs Errors
	if errors.As(err, &errs) && len(errs) == 1 && errs[0].Empty {
		err = nil
	}
	// go-yaml, as kubectl calls it, reads the first YAML document of a
	// "---"-separated chunk and silently drops the rest ("a: 1\n...\nb: 2",
	// or JSON glued to a separator), and lets a duplicated key replace the
	// first. dractl reports both, as kube-apiserver's strict field
	// validation does for the latter.
	stricter = err != nil && (strings.Contains(err.Error(), "more than one YAML document") || strings.Contains(err.Error(), "duplicate field"))
	return names, err != nil, stricter
}

// checkSplitAgrees: where kubectl reads a stream without error, dractl
// reads the same objects in the same order without error; where kubectl
// stops with an error, dractl reports one too, having read the same
// objects up to there.
func checkSplitAgrees(t testing.TB, data string) {
	want, wantFail := kubectlNames(data)
	got, gotFail, stricter := dractlNames(t, data)
	if stricter {
		return
	}
	if wantFail != gotFail {
		t.Fatalf("stream %q:\nkubectl: %v failed=%v\ndractl:  %v failed=%v", data, want, wantFail, got, gotFail)
	}
	if !wantFail && !slices.Equal(got, want) {
		t.Fatalf("stream %q:\nkubectl: %v\ndractl:  %v", data, want, got)
	}
	if wantFail && (len(got) < len(want) || !slices.Equal(got[:len(want)], want)) {
		t.Fatalf("stream %q: before kubectl's error it read %v, dractl %v", data, want, got)
	}
}

// TestSplitAgreesWithKubectl is the property over many random streams;
// FuzzSplitAgreesWithKubectl lets the fuzzer pick the streams.
func TestSplitAgreesWithKubectl(t *testing.T) {
	fixed := []string{
		nodeJSON("a", false) + "\n---\n" + nodeJSON("b", false) + "\n---\n" + nodeJSON("c", true),
		nodeJSON("a", true) + "\n" + nodeJSON("b", false) + "\n---\n" + nodeJSON("c", false),
		nodeJSON("a", false) + "\n" + nodeYAML("b"),
		nodeJSON("a", false) + "  \n  foo: 1\n  bar: 2\n",
		"{apiVersion: v1, kind: Node, metadata: {name: a}}\n---\n" + nodeYAML("b"),
		nodeYAML("a") + "---x\n" + nodeYAML("b"),
	}
	for _, s := range fixed {
		checkSplitAgrees(t, s)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		seed := make([]byte, r.IntN(12))
		for i := range seed {
			seed[i] = byte(r.IntN(256))
		}
		checkSplitAgrees(t, genStream(seed))
	}
}

func FuzzSplitAgreesWithKubectl(f *testing.F) {
	f.Add([]byte{0, 4, 0, 4, 1})
	f.Add([]byte{1, 0, 4, 2})
	f.Add([]byte{2, 10, 3, 11, 14})
	f.Fuzz(func(t *testing.T, seed []byte) {
		if len(seed) > 64 {
			return
		}
		checkSplitAgrees(t, genStream(seed))
	})
}

func TestJSONStreamWithSeparators(t *testing.T) {
	in := nodeJSON("a", true) + "\n---\n" + nodeJSON("b", true) + "\n---\n" + nodeJSON("c", false) + "\n"
	objs, err := Bytes("s.json", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, fmt.Sprintf("%s %s line %d", o.Source, o.Name, o.Source.Line))
	}
	want := []string{"s.json#1 a line 1", "s.json#2 b line 9", "s.json#3 c line 17"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestOtherKinds: objects of kinds dractl does not judge are read with
// their content untouched, counted, and never an error.
func TestOtherKinds(t *testing.T) {
	in := `apiVersion: v1
kind: Namespace
metadata:
  name: gpu-test1
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: gpu-test1
spec:
  replicas: 2
  template: {spec: {containers: [{name: c, image: x, whatever: [1, 2]}]}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: r}
value: 1000
`
	objs, err := Bytes("demo.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 {
		t.Fatalf("got %d objects, want 3", len(objs))
	}
	for _, o := range objs {
		if _, ok := o.Obj.(*unstructured.Unstructured); !ok {
			t.Errorf("%s: Obj is %T, want *unstructured.Unstructured", o.Kind, o.Obj)
		}
	}
	if objs[1].Namespace != "gpu-test1" || objs[1].APIVersion != "apps/v1" {
		t.Errorf("Deployment read as %s in %q", objs[1].APIVersion, objs[1].Namespace)
	}
	var raw map[string]any
	if err := json.Unmarshal(objs[1].Raw, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["status"]; ok {
		t.Errorf("raw Deployment gained a status: %s", objs[1].Raw)
	}
}

// TestRawIsAsWritten: judged kinds other than ResourceSlice keep the
// object as written too, without the defaults and namespace added to Obj.
func TestRawIsAsWritten(t *testing.T) {
	in := "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: x}}]}}\n"
	objs, err := Bytes("a.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(objs[0].Raw); got != `{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}}` {
		t.Errorf("Node raw = %s", got)
	}
	if got := string(objs[1].Raw); strings.Contains(got, "count") || strings.Contains(got, "default") || strings.Contains(got, "status") {
		t.Errorf("claim raw has defaults: %s", got)
	}
	if c := objs[1].Obj.(*resourcev1.ResourceClaim); c.Namespace != "default" || c.Spec.Devices.Requests[0].Exactly.Count != 1 {
		t.Errorf("claim object not defaulted: %+v", c)
	}
}

func TestDuplicates(t *testing.T) {
	in := nodeYAML("a") + "---\n" + nodeYAML("b") + "---\n" + nodeYAML("a") +
		"---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: a}\n" +
		"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {}\n" +
		"---\napiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c, namespace: default}\nspec: {}\n" +
		"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: other}\nspec: {}\n"
	objs, err := Bytes("d.yaml", []byte(in))
	checkErrors(t, err, []wantErr{
		{"d.yaml#3", "Node", "a", "", "duplicate object: Node a is already defined at d.yaml#1"},
		{"d.yaml#6", "ResourceClaim", "c", "", "duplicate object: ResourceClaim c in namespace default is already defined at d.yaml#5"},
	})
	if len(objs) != 5 {
		t.Errorf("got %d objects, want the first of each: 5", len(objs))
	}
}

func TestObjectSizeLimit(t *testing.T) {
	big := nodeYAML("big") + "  labels:\n    a: " + strings.Repeat("x", 2000) + "\n"
	small := nodeYAML("small")
	list := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(big, "\n"), "\n", "\n  ") + "\n- " + strings.ReplaceAll(strings.TrimSuffix(nodeYAML("small2"), "\n"), "\n", "\n  ") + "\n"
	opts := Options{MaxObjectBytes: 1024}
	objs, err := opts.Bytes("a.yaml", []byte(big+"---\n"+small+"---\n"+list))
	checkErrors(t, err, []wantErr{
		{"a.yaml#1", "", "", "", "more than the 1 KiB that kube-apiserver accepts"},
		{"a.yaml#3 items[0]", "", "", "", "more than the 1 KiB"},
	})
	if len(objs) != 2 {
		t.Errorf("got %d objects, want the small one twice: %v", len(objs), objs)
	}
	jsonBig := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"a":"` + strings.Repeat("x", 2000) + `"}}}`
	_, err = opts.Bytes("a.json", []byte(jsonBig))
	checkErrors(t, err, []wantErr{{"a.json#1", "Node", "n", "", "more than the 1 KiB"}})
	if _, err := Bytes("a.json", []byte(jsonBig)); err != nil {
		t.Errorf("the default limit is 3 MiB: %v", err)
	}
}

func TestOlderVersions(t *testing.T) {
	in := `apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    basic:
      attributes: {model: {string: A100}}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: c}
spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.example.com}]}}
---
apiVersion: resource.k8s.io/v1beta2
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: bad}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: q, resourceSliceCount: 1}
  devices: [{name: gpu-0, basic: {atributes: {}}}]
`
	objs, err := Bytes("old.yaml", []byte(in))
	checkErrors(t, err, []wantErr{{"old.yaml#4", "ResourceSlice", "bad", "spec.devices[0].basic.atributes", `did you mean "attributes"?`}})
	if len(objs) != 3 {
		t.Fatalf("got %d objects", len(objs))
	}
	s := objs[0].Obj.(*api.ResourceSlice)
	if s.APIVersion != api.APIVersion || objs[0].APIVersion != "resource.k8s.io/v1beta1" || s.Spec.Devices[0].Attributes["model"].StringValue == nil {
		t.Errorf("slice not converted: %s %+v", s.APIVersion, s.Spec.Devices)
	}
	c := objs[1].Obj.(*resourcev1.ResourceClaim)
	if e := c.Spec.Devices.Requests[0].Exactly; e == nil || e.DeviceClassName != "gpu.example.com" || e.Count != 1 || c.Namespace != "default" {
		t.Errorf("claim not converted: %+v", c.Spec.Devices.Requests[0])
	}
	if _, ok := objs[2].Obj.(*resourcev1.DeviceClass); !ok {
		t.Errorf("class is %T", objs[2].Obj)
	}
}

func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     wantErr
	}{
		{"overflowing integer shows its digits", "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: x, count: 100000000000000000000000}}]}}\n",
			wantErr{"a.yaml#1", "ResourceClaim", "c", "spec.devices.requests[0].exactly.count", "found number 100000000000000000000000"}},
		{"Helm template", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: {{ .Values.name }}\n",
			wantErr{"a.yaml#1", "", "", "", "template directives ({{ ... }})"}},
		{"shell variable in a name", "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: gpu-${TEST}\nspec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: x}}]}}}\n",
			wantErr{"a.yaml#1", "ResourceClaimTemplate", "gpu-${TEST}", "metadata.name", "holds the placeholder ${TEST} (a shell-style variable"}},
		{"shell variable in a namespace", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: $NS\n",
			wantErr{"a.yaml#1", "Pod", "p", "metadata.namespace", "holds the placeholder $NS"}},
		{"variable in an object of another kind", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${NAMESPACE}\n",
			wantErr{"a.yaml#1", "Namespace", "${NAMESPACE}", "metadata.name", "holds the placeholder ${NAMESPACE}"}},
		{"quoted Helm directive", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: \"{{ .Values.name }}\"\n",
			wantErr{"a.yaml#1", "DeviceClass", "{{ .Values.name }}", "metadata.name", "holds the placeholder {{ .Values.name }} (a template directive"}},
		{"mapping key", "apiVersion: v1\nkind: Node\n? [a]\n: b\n",
			wantErr{"a.yaml#1", "", "", "", "a mapping key is a sequence; keys must be strings"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Bytes("a.yaml", []byte(tc.in))
			checkErrors(t, err, []wantErr{tc.want})
			if strings.Contains(err.Error(), "yaml.MapSlice") || strings.Contains(err.Error(), "interface {}") {
				t.Errorf("message names Go types: %v", err)
			}
		})
	}
}

func TestBadSeparatorDoesNotHideLaterDocuments(t *testing.T) {
	objs, err := Bytes("a.yaml", []byte(nodeYAML("a")+"--- {}\n"+nodeYAML("b")))
	checkErrors(t, err, []wantErr{{"a.yaml#2", "", "", "", `invalid YAML document separator "--- {}"`}})
	if len(objs) != 2 || !bytes.Equal([]byte(objs[1].Name), []byte("b")) {
		t.Errorf("got %d objects", len(objs))
	}
}

// TestDeviceTaintRules: DeviceTaintRules are judged at every version
// kube-apiserver 1.37 serves them, become v1 objects and are grouped.
func TestDeviceTaintRules(t *testing.T) {
	var in strings.Builder
	for _, v := range []string{"v1", "v1beta2", "v1alpha3"} {
		fmt.Fprintf(&in, `---
apiVersion: resource.k8s.io/%s
kind: DeviceTaintRule
metadata: {name: rule-%s}
spec:
  deviceSelector: {driver: gpu.example.com, pool: node-1, device: gpu-0}
  taint: {key: example.com/unhealthy, effect: NoSchedule}
`, v, v)
	}
	objs, err := Bytes("rules.yaml", []byte(in.String()))
	if err != nil {
		t.Fatal(err)
	}
	set := Group(objs)
	if len(set.TaintRules) != 3 {
		t.Fatalf("%d DeviceTaintRules grouped, want 3", len(set.TaintRules))
	}
	for _, r := range set.TaintRules {
		if sel := r.Spec.DeviceSelector; sel == nil || ptr.Deref(sel.Device, "") != "gpu-0" || r.Spec.Taint.Effect != resourcev1.DeviceTaintEffectNoSchedule {
			t.Errorf("%s: spec %+v", r.Name, r.Spec)
		}
	}
	if _, err := Bytes("bad.yaml", []byte("apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: r}\nspec: {taint: {key: k, effect: NoSchedule}, selector: {}}\n")); err == nil || !strings.Contains(err.Error(), "selector") {
		t.Errorf("unknown field: %v, want it named", err)
	}
}
