package api

import (
	"maps"
	"testing"

	"k8s.io/utils/ptr"
)

func intAttr(v int64) DeviceAttribute { return DeviceAttribute{IntValue: ptr.To(v)} }

// TestMergedKeepsEveryKey guards the iterator behind Attributes() and
// Flatten: a key shadowed by a later mixin must not hide the other keys of
// the same mixin.
func TestMergedKeepsEveryKey(t *testing.T) {
	s := &ResourceSlice{Spec: ResourceSliceSpec{
		Mixins: &ResourceSliceMixins{Device: []DeviceMixin{
			{Name: "early", Attributes: map[QualifiedName]DeviceAttribute{"a": intAttr(1), "b": intAttr(1), "c": intAttr(1), "d": intAttr(1)}},
			{Name: "late", Attributes: map[QualifiedName]DeviceAttribute{"a": intAttr(2), "e": intAttr(2)}},
		}},
		Devices: []Device{{Name: "dev", Includes: []string{"early", "late"}, Attributes: map[QualifiedName]DeviceAttribute{"b": intAttr(3)}}},
	}}
	v, err := NewMixinIndex(&s.Spec).Device(&s.Spec.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[QualifiedName]int64{"a": 2, "b": 3, "c": 1, "d": 1, "e": 2}
	got := map[QualifiedName]int64{}
	for k, a := range v.Attributes() {
		if _, dup := got[k]; dup {
			t.Errorf("Attributes() yielded %q twice", k)
		}
		got[k] = *a.IntValue
	}
	if !maps.Equal(got, want) {
		t.Errorf("Attributes() = %v, want %v", got, want)
	}
	for k, w := range want {
		if a, ok := v.Attribute(k); !ok || *a.IntValue != w {
			t.Errorf("Attribute(%q) = %v, %v; want %d", k, a, ok, w)
		}
	}
	if n := v.NumAttributesAndCapacities(); n != len(want) {
		t.Errorf("NumAttributesAndCapacities() = %d, want %d", n, len(want))
	}
	flat := v.Flatten()
	if len(flat.Attributes) != len(want) || flat.Includes != nil {
		t.Errorf("Flatten() attributes = %v includes = %v", flat.Attributes, flat.Includes)
	}
}
