package manifest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWriteRoundTrip(t *testing.T) {
	objs, err := decode.Paths([]string{"../../core/decode/testdata"}, nil)
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
			if err := Write(&buf, anys, format); err != nil {
				t.Fatal(err)
			}
			again, err := decode.Bytes("out."+format, buf.Bytes())
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

func TestWriteShapes(t *testing.T) {
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
		{"json several objects make a List", []any{decode.Object{Obj: node}, slice}, "json", []string{`"kind": "List"`, `"items": [`, `"kind": "Node"`, `"kind": "ResourceSlice"`}, ""},
		{"json nothing is an empty List", nil, "json", []string{`"kind": "List"`, `"items": []`}, ""},
		{"upstream slice", []any{&resourcev1.ResourceSlice{}}, "yaml", []string{"kind: ResourceSlice"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, tt.objs, tt.format); err != nil {
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
		t.Error("Write changed the caller's objects")
	}
}

func TestWriteErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, []any{&corev1.Node{}}, "xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("unknown format: err = %v", err)
	}
	if err := Write(&buf, []any{&corev1.Node{}, 42}, "yaml"); err == nil || !strings.Contains(err.Error(), "object 1: unsupported type int") {
		t.Errorf("unsupported type: err = %v", err)
	}
}
func TestWriteYAMLNonPrintable(t *testing.T) {
	for _, s := range []string{"\x7f", "a\u0080b", "\u009f", "\u0085", "\ufffe\uffff", "\u2028\u2029", "ok é \u00a0"} {
		slice := &api.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"k": s}, Annotations: map[string]string{s: "v"}}}
		for _, obj := range []any{slice, json.RawMessage(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"k":"` + s + `"}}}`)} {
			var buf bytes.Buffer
			if err := Write(&buf, []any{obj}, "yaml"); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			again, err := decode.Bytes("out.yaml", buf.Bytes())
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
