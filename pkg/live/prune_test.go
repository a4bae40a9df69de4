package live

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/internal/testgen"
	"github.com/dractl/dractl/pkg/api"
)

// A slice pruned on the wire decodes to the slice TrimToPool leaves:
// nothing else is lost, whatever the slice holds.
func TestPoolFieldsPruneOnlyAttributesAndManagedFields(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 1))
		s, err := api.ToV1(testgen.Slice(r, testgen.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		s.Labels = map[string]string{"seed": "x"}
		s.ResourceVersion = "17"
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "driver", Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
		raw, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		pruned, err := slicePoolFields.prune(nil, raw)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var got resourcev1.ResourceSlice
		if err := got.Unmarshal(pruned); err != nil {
			t.Fatalf("seed %d: the pruned slice does not decode: %v", seed, err)
		}
		want := decoded(t, raw)
		TrimToPool(want)
		if diff := cmp.Diff(want, &got); diff != "" {
			t.Fatalf("seed %d: pruned slice differs (-want +got):\n%s", seed, diff)
		}
	}
}

// A device whose length prefix needs fewer bytes once its attributes are
// gone (2 bytes before, 1 after) still decodes.
func TestPruneShortensLengthPrefixes(t *testing.T) {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "d", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1},
			AllNodes: new(bool),
			Devices: []resourcev1.Device{{Name: "a", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"long": {StringValue: new(strings.Repeat("x", 200))}}}, {Name: "b"}}},
	}
	raw, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pruned, err := slicePoolFields.prune(nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(pruned) >= len(raw)-200 {
		t.Errorf("pruned %d bytes of %d, want the attribute gone", len(raw)-len(pruned), len(raw))
	}
	var got resourcev1.ResourceSlice
	if err := got.Unmarshal(pruned); err != nil {
		t.Fatal(err)
	}
	want := decoded(t, raw)
	TrimToPool(want)
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, n := range []int{1, 5, len(raw) / 2, len(raw) - 1} {
		if _, err := slicePoolFields.prune(nil, raw[:n]); err == nil {
			t.Errorf("a slice cut after %d of %d bytes was pruned without an error", n, len(raw))
		}
	}
}

// decoded is the slice as the generated Unmarshal reads it unpruned.
func decoded(t *testing.T, raw []byte) *resourcev1.ResourceSlice {
	t.Helper()
	var s resourcev1.ResourceSlice
	if err := s.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	return &s
}
