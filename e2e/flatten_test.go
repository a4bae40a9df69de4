package e2e

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/ops/manifest"
)

// What `dractl flatten` prints is accepted by a real kube-apiserver 1.37,
// which knows no mixins and checks v1's per-slice limits: for every
// example, and for a pool at KEP-5234's limits whose slices, flattened
// whole, v1 refuses (128 devices consuming counters, 32 counter sets).
// Each pool's slices then make exactly the resourceSliceCount they
// declare.
func TestFlattenOutputIsAccepted(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	dirs, err := os.ReadDir(filepath.Join(repo, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, d := range dirs {
		if d.IsDir() {
			inputs = append(inputs, filepath.Join(repo, "examples", d.Name()))
		}
	}
	var objs []any
	for _, s := range testgen.MixinPool128("gpu.example.com", "mixin-128", "node-1") {
		objs = append(objs, s)
	}
	limits := filepath.Join(t.TempDir(), "mixin-128.yaml")
	f, err := os.Create(limits)
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.Write(f, objs, "yaml"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, limits)

	codecs := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)
	type poolKey struct{ driver, pool string }
	total := map[poolKey]int64{}
	for _, in := range inputs {
		// Some examples are one node in two forms, with the same names.
		if err := cp.Client.ResourceV1().ResourceSlices().DeleteCollection(cp.Context(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		declared, created := map[poolKey]int64{}, map[poolKey]int64{}
		r := dractl(t, "", "flatten", "--strict", "-o", "yaml", "-f", in)
		if r.code != 0 {
			t.Fatalf("flatten %s: exit %d\n%s", in, r.code, r.err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(r.out), 4096)
		for {
			var doc json.RawMessage
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			// Strict: a field the server's types lack is an error here,
			// not a silent drop.
			obj, gvk, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				if gvk != nil && gvk.Kind != api.KindSlice {
					continue
				}
				t.Fatalf("%s: %v\n%s", in, err, doc)
			}
			s, ok := obj.(*resourcev1.ResourceSlice)
			if !ok {
				continue
			}
			if _, err := cp.Client.ResourceV1().ResourceSlices().Create(cp.Context(), s, metav1.CreateOptions{}); err != nil {
				t.Errorf("%s: kube-apiserver refused ResourceSlice %s: %v", in, s.Name, err)
				continue
			}
			k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
			declared[k] = s.Spec.Pool.ResourceSliceCount
			created[k]++
			total[k]++
		}
		for k, n := range created {
			if declared[k] != n {
				t.Errorf("%s: pool %s/%s: %d slices, resourceSliceCount %d", in, k.driver, k.pool, n, declared[k])
			}
		}
	}
	if n := total[poolKey{"gpu.example.com", "mixin-128"}]; n != 6 {
		t.Errorf("the pool at KEP-5234's limits made %d v1 slices, want 6", n)
	}
}
