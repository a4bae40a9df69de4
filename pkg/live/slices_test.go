package live

import (
	"bytes"
	"errors"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/utils/ptr"
)

func TestSplitListReadsMetadataAndItemsApart(t *testing.T) {
	list := &resourcev1.ResourceSliceList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page", RemainingItemCount: ptr.To[int64](7)},
	}
	for _, name := range []string{"a", "b", "c"} {
		list.Items = append(list.Items, resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 3},
				NodeName: ptr.To("node-1"), Devices: []resourcev1.Device{{Name: "gpu-" + name}}},
		})
	}
	raw, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	meta, items, err := splitList(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(list.ListMeta, meta) {
		t.Errorf("list metadata %+v, want %+v", meta, list.ListMeta)
	}
	if len(items) != len(list.Items) {
		t.Fatalf("%d items, want %d", len(items), len(list.Items))
	}
	for i, b := range items {
		var s resourcev1.ResourceSlice
		if err := s.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(list.Items[i], s) {
			t.Errorf("item %d: %+v, want %+v", i, s, list.Items[i])
		}
	}
	if _, _, err := splitList(raw[:len(raw)-3]); err == nil {
		t.Error("a truncated list was read without an error")
	}
}

// unwrap reads the list out of the envelope the API server's protobuf
// serializer writes, and refuses what is not one.
func TestUnwrapReadsTheProtobufEnvelope(t *testing.T) {
	list := &resourcev1.ResourceSliceList{ListMeta: metav1.ListMeta{Continue: "c"},
		Items: []resourcev1.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}
	list.APIVersion, list.Kind = "resource.k8s.io/v1", "ResourceSliceList"
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(nil, nil).Encode(list, &buf); err != nil {
		t.Fatal(err)
	}
	raw, err := unwrap(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	meta, items, err := splitList(raw)
	if err != nil || meta.Continue != "c" || len(items) != 1 {
		t.Errorf("got %+v, %d items, %v; want the list", meta, len(items), err)
	}
	if _, err := unwrap([]byte(`{"kind":"ResourceSliceList"}`)); !errors.Is(err, errNotProtobuf) {
		t.Errorf("JSON: got %v, want errNotProtobuf", err)
	}
	if _, err := unwrap(buf.Bytes()[:buf.Len()-10]); err == nil {
		t.Error("a truncated envelope was read without an error")
	}
}
