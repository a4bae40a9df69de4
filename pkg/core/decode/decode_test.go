package decode

import (
	"errors"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sliceHead = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: gpu-node-0
spec:
  driver: gpu.example.com
  nodeName: node-0
  pool: {name: node-0, generation: 1, resourceSliceCount: 1}
`

// wantErr is an expected error; Detail matches as a substring so that
// library wording (the quantity regexp, go-yaml messages) may change.
type wantErr struct {
	src    string
	kind   string
	name   string
	field  string
	detail string
}

func errorsOf(t *testing.T, err error) Errors {
	t.Helper()
	if err == nil {
		return nil
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, want decode.Errors: %v", err, err)
	}
	return es
}

func checkErrors(t *testing.T, err error, want []wantErr) {
	t.Helper()
	got := errorsOf(t, err)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(got), len(want), err)
	}
	for i, w := range want {
		g := got[i]
		if g.Source.String() != w.src || g.Kind != w.kind || g.Name != w.name || g.Field != w.field || !strings.Contains(g.Detail, w.detail) {
			t.Errorf("error %d:\n got  %q %q %q %q %q\n want %q %q %q %q contains %q",
				i, g.Source, g.Kind, g.Name, g.Field, g.Detail, w.src, w.kind, w.name, w.field, w.detail)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		in   string
		want []wantErr
	}{{
		name: "unknown field at depth, with suggestion",
		file: "a.yaml",
		in: sliceHead + `  devices:
  - name: g0
  - name: g1
  - name: g2
  - name: g3
    consumesCounters:
    - counterSet: gpu-3
    - countrSet: gpu-3
`,
		want: []wantErr{{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.devices[3].consumesCounters[1].countrSet", `unknown field; did you mean "counterSet"?`}},
	}, {
		name: "unknown mixin field",
		file: "a.yaml",
		in:   sliceHead + "  mixins:\n    device:\n    - name: m\n      atributes: {}\n",
		want: []wantErr{{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.mixins.device[0].atributes", `did you mean "attributes"?`}},
	}, {
		name: "duplicate field in YAML keeps its path",
		file: "a.yaml",
		in:   sliceHead + "  devices:\n  - name: a\n    nodeName: n1\n    nodeName: n2\n",
		want: []wantErr{{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.devices[0].nodeName", "duplicate field"}},
	}, {
		name: "duplicate field in JSON",
		file: "a.json",
		in:   `{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"c","name":"d"},"spec":{}}`,
		want: []wantErr{{"a.json#1", "DeviceClass", "d", "metadata.name", "duplicate field"}},
	}, {
		name: "wrong type with list index",
		file: "a.yaml",
		in:   sliceHead + "  devices:\n  - name: a\n  - name: b\n    attributes:\n      index: {int: three}\n",
		want: []wantErr{{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.devices[1].attributes.index.int", "wrong type: expected integer (int64), found string"}},
	}, {
		name: "YAML 1.1 booleans are booleans, as for kubectl",
		file: "a.yaml",
		in:   sliceHead + "  devices:\n  - name: a\n    attributes:\n      ecc: {string: yes}\n",
		want: []wantErr{{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.devices[0].attributes.ecc.string", "expected string, found bool"}},
	}, {
		name: "bad quantities: every one is reported with its field",
		file: "a.yaml",
		in: sliceHead + `  sharedCounters:
  - name: cs
    counters:
      memory: {value: 80Gb}
  devices:
  - name: a
    capacity:
      memory: {value: lots}
`,
		want: []wantErr{
			{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.sharedCounters[0].counters.memory.value", `invalid quantity "80Gb"`},
			{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.devices[0].capacity.memory.value", `invalid quantity "lots"`},
		},
	}, {
		name: "quantity of the wrong type",
		file: "a.yaml",
		in:   sliceHead + "  devices:\n  - name: a\n    capacity:\n      memory: {value: [1]}\n",
		want: []wantErr{{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.devices[0].capacity.memory.value", "expected a quantity (string or number), found array"}},
	}, {
		name: "type errors and unknown fields together",
		file: "a.yaml",
		in:   sliceHead + "  devices:\n  - name: 7\n    bogus: true\n",
		want: []wantErr{
			{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.devices[0].name", "expected string, found number"},
			{"a.yaml#1", "ResourceSlice", "gpu-node-0", "spec.devices[0].bogus", "unknown field"},
		},
	}, {
		name: "other kind without a name",
		file: "a.yaml",
		in:   "apiVersion: apps/v1\nkind: Deployment\nmetadata: {generateName: web-}\n",
		want: []wantErr{{"a.yaml#1", "Deployment", "", "metadata.name", "missing"}},
	}, {
		name: "unsupported version of a known kind",
		file: "a.yaml",
		in:   "apiVersion: resource.k8s.io/v1alpha3\nkind: ResourceSlice\n",
		want: []wantErr{{"a.yaml#1", "ResourceSlice", "", "", `expected resource.k8s.io/v1, resource.k8s.io/v1beta1, resource.k8s.io/v1beta2`}},
	}, {
		name: "missing kind and apiVersion",
		file: "a.yaml",
		in:   "metadata: {name: x}\n",
		want: []wantErr{
			{"a.yaml#1", "", "x", "apiVersion", "missing"},
			{"a.yaml#1", "", "x", "kind", "missing"},
		},
	}, {
		name: "kind not a string",
		file: "a.json",
		in:   `{"apiVersion":"v1","kind":["Node"]}`,
		want: []wantErr{{"a.json#1", "", "", "kind", "expected string, found array"}},
	}, {
		name: "document not an object",
		file: "a.yaml",
		in:   "- a\n- b\n---\nnull\n---\njust text\n",
		want: []wantErr{
			{"a.yaml#1", "", "", "", "found a sequence"},
			{"a.yaml#2", "", "", "", "null"},
			{"a.yaml#3", "", "", "", "not a mapping"},
		},
	}, {
		name: "YAML syntax error names the file line",
		file: "a.yaml",
		in:   "apiVersion: v1\nkind: Node\n---\n# c\napiVersion: v1\nkind: Node\nmetadata: {name: [}\n",
		want: []wantErr{{"a.yaml#2", "", "", "", "yaml: line 7: did not find expected node content"}},
	}, {
		name: "YAML scanner error names the file line",
		file: "a.yaml",
		in:   "apiVersion: v1\nkind: Node\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: a\n\tlabels: {}\n",
		want: []wantErr{{"a.yaml#2", "", "", "", "yaml: line 8: found a tab character"}},
	}, {
		name: "JSON syntax error ends the stream",
		file: "a.json",
		in:   "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}\n{\"kind\":\n\"Node\",}\n{}",
		want: []wantErr{{"a.json#2", "", "", "", "invalid JSON at line 3"}},
	}, {
		name: "JSON array is not an object",
		file: "a.json",
		in:   `[{"apiVersion":"v1","kind":"Node"}]`,
		want: []wantErr{{"a.json#1", "", "", "", "found a sequence"}},
	}, {
		name: "errors in every document, in order",
		file: "a.yaml",
		in:   "apiVersion: v1\nkind: Node\nmetadata: {name: a, nme: x}\n---\napiVersion: v1\nkind: Nod\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: {}}\n",
		want: []wantErr{
			{"a.yaml#1", "Node", "a", "metadata.nme", `did you mean "name"?`},
			{"a.yaml#2", "Nod", "", "metadata.name", "missing"},
			{"a.yaml#3", "Pod", "p", "spec.containers", "expected array, found object"},
		},
	}, {
		name: "v1 List items",
		file: "l.yaml",
		in: `apiVersion: v1
kind: List
items:
- kind: Node
  metadata: {name: n0}
- 5
- apiVersion: v1
  kind: NodeList
- apiVersion: v1
  kind: Node
  metadata: {name: n3, labels: {gpu: 1}}
- apiVersion: v1
  kind: Node
  metadata: {name: fine}
`,
		want: []wantErr{
			{"l.yaml#1 items[0]", "Node", "n0", "apiVersion", "missing"},
			{"l.yaml#1 items[1]", "", "", "", "expected an object, found number"},
			{"l.yaml#1 items[2]", "NodeList", "", "kind", "list inside a list"},
			{"l.yaml#1 items[3]", "Node", "n3", "metadata.labels.gpu", "expected string, found number"},
		},
	}, {
		name: "typed list: envelope and items",
		file: "l.json",
		in: `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSliceList","metadata":{"resourceVersion":5},"itemz":[],
"items":[{"kind":"DeviceClass"},{"metadata":{"name":"s"},"spec":{"driver":"d","poool":{}}}]}`,
		want: []wantErr{
			{"l.json#1", "ResourceSliceList", "", "metadata.resourceVersion", "expected string, found number"},
			{"l.json#1", "ResourceSliceList", "", "itemz", `did you mean "items"?`},
			{"l.json#1 items[0]", "DeviceClass", "", "kind", `expected "ResourceSlice" in a ResourceSliceList`},
			{"l.json#1 items[1]", "ResourceSlice", "s", "spec.poool", `did you mean "pool"?`},
		},
	}, {
		name: "typed list of another kind: items read leniently",
		file: "l.yaml",
		in:   "apiVersion: apps/v1\nkind: DeploymentList\nitems: [{metadata: {name: a}}, {metadata: {}}]\n",
		want: []wantErr{{"l.yaml#1 items[1]", "Deployment", "", "metadata.name", "missing"}},
	}, {
		name: "items not an array",
		file: "l.yaml",
		in:   "apiVersion: v1\nkind: List\nitems: {a: b}\n",
		want: []wantErr{{"l.yaml#1", "List", "", "items", "expected array, found object"}},
	}, {
		name: "duplicate key across YAML key types",
		file: "a.yaml",
		in:   "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels: {1: a, \"1\": b}\n",
		want: []wantErr{{"a.yaml#1", "Node", "a", "metadata.labels.1", "duplicate field"}},
	}, {
		name: "a second document without separator",
		file: "a.yaml",
		in:   "apiVersion: v1\nkind: Node\n...\napiVersion: v1\nkind: Node\n",
		want: []wantErr{{"a.yaml#1", "", "", "", "more than one YAML document"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Bytes(tt.file, []byte(tt.in))
			checkErrors(t, err, tt.want)
			for _, o := range objs {
				for _, w := range tt.want {
					if o.Source.String() == w.src {
						t.Errorf("object %s returned although it has an error", o.Source)
					}
				}
			}
		})
	}
}

type wantObj struct {
	src, kind, namespace, name string
	line                       int
}

func checkObjects(t *testing.T, objs []Object, want []wantObj) {
	t.Helper()
	if len(objs) != len(want) {
		t.Fatalf("got %d objects, want %d: %+v", len(objs), len(want), objs)
	}
	for i, w := range want {
		o := objs[i]
		if o.Source.String() != w.src || o.Kind != w.kind || o.Namespace != w.namespace || o.Name != w.name || (w.line != 0 && o.Source.Line != w.line) {
			t.Errorf("object %d: got %s line %d %s %s/%s, want %s line %d %s %s/%s", i,
				o.Source, o.Source.Line, o.Kind, o.Namespace, o.Name, w.src, w.line, w.kind, w.namespace, w.name)
		}
	}
}

func TestDecodeObjects(t *testing.T) {
	tests := []struct {
		name string
		file string
		in   string
		want []wantObj
	}{{
		name: "empty and comment-only documents are skipped and not counted",
		file: "a.yaml",
		in:   "# header\n---\n\n---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n---   # trailing comment\n# only a comment\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\n",
		want: []wantObj{{"a.yaml#1", "Node", "", "a", 5}, {"a.yaml#2", "Pod", "default", "p", 11}},
	}, {
		name: "concatenated JSON",
		file: "a.json",
		in:   "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}}\n\n{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"b\"}}{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"c\"}}",
		want: []wantObj{{"a.json#1", "Node", "", "a", 1}, {"a.json#2", "Node", "", "b", 3}, {"a.json#3", "Node", "", "c", 3}},
	}, {
		name: "JSON in a .yaml file, with a byte order mark",
		file: "a.yaml",
		in:   "\xef\xbb\xbf {\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}}",
		want: []wantObj{{"a.yaml#1", "Node", "", "a", 1}},
	}, {
		name: "CRLF line endings",
		file: "a.yaml",
		in:   "apiVersion: v1\r\nkind: Node\r\nmetadata: {name: a}\r\n---\r\napiVersion: v1\r\nkind: Node\r\nmetadata: {name: b}\r\n",
		want: []wantObj{{"a.yaml#1", "Node", "", "a", 1}, {"a.yaml#2", "Node", "", "b", 5}},
	}, {
		name: "v1 List expands in order; cluster-scoped namespace dropped",
		file: "l.yaml",
		in:   "apiVersion: v1\nkind: List\nmetadata: {}\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: node-0, namespace: x}}\n- {apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: c, namespace: team}}\n",
		want: []wantObj{{"l.yaml#1 items[0]", "Node", "", "node-0", 1}, {"l.yaml#1 items[1]", "ResourceClaim", "team", "c", 1}},
	}, {
		name: "typed list items inherit apiVersion and kind",
		file: "l.json",
		in:   `{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClassList","items":[{"metadata":{"name":"a"}},{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"b"}}]}`,
		want: []wantObj{{"l.json#1 items[0]", "DeviceClass", "", "a", 1}, {"l.json#1 items[1]", "DeviceClass", "", "b", 1}},
	}, {
		name: "empty list",
		file: "l.yaml",
		in:   "apiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: PodList\nitems: null\n",
	}, {
		name: "YAML anchors and merge keys",
		file: "a.yaml",
		in:   "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels: &l {zone: z1}\n  annotations:\n    <<: *l\n    extra: e\n",
		want: []wantObj{{"a.yaml#1", "Node", "", "a", 1}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Bytes(tt.file, []byte(tt.in))
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			checkObjects(t, objs, tt.want)
		})
	}
}

func TestDecodeSetsTypeMeta(t *testing.T) {
	objs, err := Bytes("l.json", []byte(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSliceList","items":[{"metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p","resourceSliceCount":1},"allNodes":true}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := Group(objs).Slices[0]
	if s.APIVersion != "resource.k8s.io/v1" || s.Kind != "ResourceSlice" {
		t.Errorf("type meta = %q %q, want resource.k8s.io/v1 ResourceSlice", s.APIVersion, s.Kind)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func node(name string) string {
	return "apiVersion: v1\nkind: Node\nmetadata: {name: " + name + "}\n"
}

func TestPaths(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b.yaml":          node("b"),
		"a.json":          `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}`,
		"c.YML":           node("c"),
		"notes.txt":       node("ignored"),
		"sub/d.yaml":      node("ignored-too"),
		"explicit.txt":    node("explicit"),
		"empty/README.md": "nothing here",
		"bad.yaml":        "apiVersion: v1\nkind: Node\nmetadata: {name: bad, x: 1}\n",
	})
	stdin := strings.NewReader(node("from-stdin") + "---\n" + node("from-stdin-2"))
	paths := []string{
		filepath.Join(dir, "explicit.txt"),
		"-",
		dir,
		filepath.Join(dir, "missing.yaml"),
		filepath.Join(dir, "empty"),
		"-",
	}
	objs, err := Paths(paths, stdin)
	checkObjects(t, objs, []wantObj{
		{filepath.Join(dir, "explicit.txt") + "#1", "Node", "", "explicit", 1},
		{"-#1", "Node", "", "from-stdin", 1},
		{"-#2", "Node", "", "from-stdin-2", 5},
		{filepath.Join(dir, "a.json") + "#1", "Node", "", "a", 1},
		{filepath.Join(dir, "b.yaml") + "#1", "Node", "", "b", 1},
		{filepath.Join(dir, "c.YML") + "#1", "Node", "", "c", 1},
	})
	checkErrors(t, err, []wantErr{
		{filepath.Join(dir, "bad.yaml") + "#1", "Node", "bad", "metadata.x", "unknown field"},
		{filepath.Join(dir, "missing.yaml"), "", "", "", "no such file or directory"},
		{filepath.Join(dir, "empty"), "", "", "", "no *.yaml, *.yml or *.json files"},
		{"-", "", "", "", "stdin given more than once"},
	})
}

// TestEmptyInputs: a path that holds no document is an error marked
// Empty, whatever its form; an empty List is a document, and a directory
// with one manifest holding objects is not empty for its others.
func TestEmptyInputs(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"nothing.yaml":          "\n# nothing\n---\n",
		"list.yaml":             "apiVersion: v1\nkind: List\nitems: []\n",
		"blank/a.yaml":          "",
		"blank/b.json":          "  \n",
		"mixed/a.yaml":          "# a placeholder\n",
		"mixed/b.yaml":          node("b"),
		"tree/sub/deep/a.yaml":  "---\n",
		"tree/README.md":        "no manifests here",
		"nested/sub/a.yaml":     node("nested"),
		"nested/top/empty.yaml": "",
	})
	tests := []struct {
		name      string
		paths     []string
		stdin     string
		recursive bool
		objects   int
		empty     []wantErr
	}{
		{"comments and separators only", []string{filepath.Join(dir, "nothing.yaml")}, "", false, 0,
			[]wantErr{{filepath.Join(dir, "nothing.yaml"), "", "", "", "the file holds no objects"}}},
		{"empty stdin", []string{"-"}, "", false, 0, []wantErr{{"-", "", "", "", "standard input holds no objects"}}},
		{"an empty List is no error", []string{filepath.Join(dir, "list.yaml")}, "", false, 0, nil},
		{"directory of empty manifests", []string{filepath.Join(dir, "blank")}, "", false, 0,
			[]wantErr{{filepath.Join(dir, "blank"), "", "", "", "files hold no objects"}}},
		{"an empty manifest beside one with objects", []string{filepath.Join(dir, "mixed")}, "", false, 1, nil},
		{"recursive tree of empty manifests", []string{filepath.Join(dir, "tree")}, "", true, 0,
			[]wantErr{{filepath.Join(dir, "tree"), "", "", "", "files hold no objects"}}},
		{"without -R the tree has no manifests", []string{filepath.Join(dir, "tree")}, "", false, 0,
			[]wantErr{{filepath.Join(dir, "tree"), "", "", "", "directory holds no *.yaml"}}},
		{"recursive tree with objects deeper down", []string{filepath.Join(dir, "nested")}, "", true, 1, nil},
		{"each path on its own", []string{filepath.Join(dir, "mixed"), "-"}, " \n", false, 1,
			[]wantErr{{"-", "", "", "", "standard input holds no objects"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Options{Recursive: tt.recursive}.Paths(tt.paths, strings.NewReader(tt.stdin))
			if len(objs) != tt.objects {
				t.Errorf("%d objects, want %d", len(objs), tt.objects)
			}
			if tt.empty == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			checkErrors(t, err, tt.empty)
			for _, e := range err.(Errors) {
				if !e.Empty {
					t.Errorf("%v: not marked Empty", e)
				}
			}
		})
	}
}

func TestPathsNoStdin(t *testing.T) {
	_, err := Paths([]string{"-"}, nil)
	checkErrors(t, err, []wantErr{{"-", "", "", "", "stdin is not available"}})
	objs, err := Paths(nil, nil)
	if len(objs) != 0 || err != nil {
		t.Errorf("Paths(nil) = %v, %v; want nothing", objs, err)
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Source: Source{File: "examples/a.yaml", Doc: 2, Item: -1}, Kind: "ResourceSlice", Name: "gpu-node-0", Field: "spec.devices[3].foo", Detail: "unknown field"},
			"examples/a.yaml#2 ResourceSlice/gpu-node-0: spec.devices[3].foo: unknown field"},
		{&Error{Source: Source{File: "a.yaml", Doc: 2, Item: 3}, Kind: "Node", Detail: "bad"}, "a.yaml#2 items[3] Node: bad"},
		{&Error{Source: Source{File: "a.yaml", Item: -1}, Detail: "cannot read: x"}, "a.yaml: cannot read: x"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	es := Errors{tests[0].err, tests[1].err}
	if got := es.Error(); !strings.HasPrefix(got, "2 errors:\n  examples/a.yaml#2") {
		t.Errorf("Errors.Error() = %q", got)
	}
	var e *Error
	if !errors.As(error(es), &e) || e != tests[0].err {
		t.Errorf("errors.As did not find the first *Error")
	}
}

// TestPodUID: a Pod read without a UID gets a name-based one, the same for
// the same namespace and name and different for another; one with a UID
// keeps it, and other kinds get none.
func TestPodUID(t *testing.T) {
	objs, err := Bytes("a.yaml", []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: q, uid: given}\n---\n"+node("node-a")))
	if err != nil {
		t.Fatal(err)
	}
	uid := func(i int) types.UID { return objs[i].Obj.(metav1.Object).GetUID() }
	if uid(0) != PodUID("default", "p") || uid(1) != PodUID("ml", "p") || uid(0) == uid(1) {
		t.Errorf("derived UIDs %q and %q, want PodUID of default/p and ml/p", uid(0), uid(1))
	}
	if _, err := uuid.Parse(string(uid(0))); err != nil || len(uid(0)) != 36 {
		t.Errorf("UID %q is not a UUID as kube-apiserver writes them: %v", uid(0), err)
	}
	if uid(2) != "given" || uid(3) != "" {
		t.Errorf("UIDs %q (given) and %q (a Node), want kept and none", uid(2), uid(3))
	}
	if PodUID("default", "p") != PodUID("default", "p") {
		t.Error("PodUID is not deterministic")
	}
}
