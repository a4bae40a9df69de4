package decode

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEncodeRoundTrip(t *testing.T) {
	objs, err := Paths([]string{"testdata"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 6 {
		t.Fatalf("testdata gave only %d objects", len(objs))
	}
	anys := make([]any, len(objs))
	for i, o := range objs {
		anys[i] = o.Obj
	}
	for _, format := range []string{"yaml", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Encode(&buf, anys, format); err != nil {
				t.Fatal(err)
			}
			again, err := Bytes("out."+format, buf.Bytes())
			if err != nil {
				t.Fatalf("re-decode: %v\n%s", err, buf.String())
			}
			if len(again) != len(objs) {
				t.Fatalf("re-decoded %d objects, want %d", len(again), len(objs))
			}
			for i := range objs {
				if !equality.Semantic.DeepEqual(objs[i].Obj, again[i].Obj) {
					t.Errorf("object %d (%s) changed in a round trip", i, objs[i].Source)
				}
			}
		})
	}
}

func TestEncodeShapes(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	slice := &api.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	tests := []struct {
		name   string
		objs   []any
		format string
		want   []string // substrings, in order
		not    string
	}{
		{"yaml separates documents", []any{node, slice}, "yaml", []string{"apiVersion: v1\nkind: Node\n", "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\n"}, ""},
		{"json single object is bare", []any{node}, "json", []string{`"kind": "Node"`}, `"List"`},
		{"json several objects make a List", []any{Object{Obj: node}, slice}, "json", []string{`"kind": "List"`, `"items": [`, `"kind": "Node"`, `"kind": "ResourceSlice"`}, ""},
		{"json nothing is an empty List", nil, "json", []string{`"kind": "List"`, `"items": []`}, ""},
		{"upstream slice", []any{&resourcev1.ResourceSlice{}}, "yaml", []string{"kind: ResourceSlice"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Encode(&buf, tt.objs, tt.format); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			if tt.not != "" && strings.Contains(out, tt.not) {
				t.Errorf("output contains %q:\n%s", tt.not, out)
			}
		})
	}
	if node.Kind != "" || slice.APIVersion != "" {
		t.Error("Encode changed the caller's objects")
	}
}

func TestEncodeErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, []any{&corev1.Node{}}, "xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("unknown format: err = %v", err)
	}
	if err := Encode(&buf, []any{&corev1.Node{}, 42}, "yaml"); err == nil || !strings.Contains(err.Error(), "object 1: unsupported type int") {
		t.Errorf("unsupported type: err = %v", err)
	}
}

func TestGroup(t *testing.T) {
	objs, err := Paths([]string{"testdata"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := Group(objs)
	counts := map[string][2]int{
		"slices":    {len(s.Slices), 3},
		"classes":   {len(s.Classes), 1},
		"claims":    {len(s.Claims), 1},
		"templates": {len(s.ClaimTemplates), 1},
		"nodes":     {len(s.Nodes), 1},
		"pods":      {len(s.Pods), 1},
	}
	for what, c := range counts {
		if c[0] != c[1] {
			t.Errorf("%d %s, want %d", c[0], what, c[1])
		}
	}
	if len(s.Sources) != len(objs) {
		t.Errorf("%d sources for %d objects", len(s.Sources), len(objs))
	}
	src, ok := s.Source(s.Slices[1])
	if !ok || src.String() != "testdata/slicelist.json#1 items[1]" {
		t.Errorf("source of second slice = %v, %v", src, ok)
	}
	if _, ok := s.Source(&api.ResourceSlice{}); ok {
		t.Error("unknown object has a source")
	}
}

// TestEncodeYAMLNonPrintable: strings may hold characters that YAML does
// not allow unescaped (DEL, C1 controls, U+FFFE); the YAML written must
// escape them and read back as the same strings.
func TestEncodeYAMLNonPrintable(t *testing.T) {
	for _, s := range []string{"\x7f", "a\u0080b", "\u009f", "\u0085", "\ufffe\uffff", "\u2028\u2029", "ok é \u00a0"} {
		slice := &api.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"k": s}, Annotations: map[string]string{s: "v"}}}
		for _, obj := range []any{slice, json.RawMessage(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"k":"` + s + `"}}}`)} {
			var buf bytes.Buffer
			if err := Encode(&buf, []any{obj}, "yaml"); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			again, err := Bytes("out.yaml", buf.Bytes())
			if err != nil || len(again) != 1 {
				t.Fatalf("%q: re-decode: %v\n%s", s, err, buf.String())
			}
			o := again[0].Obj.(metav1.Object)
			if o.GetLabels()["k"] != s {
				t.Errorf("%q: label read back as %q\n%s", s, o.GetLabels()["k"], buf.String())
			}
			if _, ok := obj.(*api.ResourceSlice); ok && o.GetAnnotations()[s] != "v" {
				t.Errorf("%q: annotation key read back as %q", s, o.GetAnnotations())
			}
		}
	}
}
