package live

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

// skewed is a slice as an API server that serves KEP-5234 stores it: its
// spec holds mixins (which these k8s.io/api types lack) and its
// managedFields say so. With recorded false the managedFields are those
// of a server that predates the field, to show what the decoders do
// without the record: read the device as if it were complete.
func skewed(recorded bool) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu", ResourceVersion: "7"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			Pool:     resourcev1.ResourcePool{Name: "node-1", Generation: 1, ResourceSliceCount: 1},
			NodeName: new("node-1"),
			Devices:  []resourcev1.Device{{Name: "gpu-0"}},
		},
	}
	spec := `{"f:spec":{"f:driver":{},"f:pool":{"f:name":{},"f:generation":{},"f:resourceSliceCount":{}},"f:nodeName":{},"f:devices":{}`
	if recorded {
		spec += `,"f:mixins":{".":{},"f:device":{}}`
	}
	s.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "labeller", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)},
		{Manager: "driver", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(spec + `}}`)},
	}
	return s
}

// specMixinsField is the field number a newer generated.proto might give
// spec.mixins: any number these types do not know is skipped alike.
const specMixinsField protowire.Number = 40

// protobufWithMixins encodes s as protobuf with one more spec field, which
// the generated Unmarshal of these types skips.
func protobufWithMixins(t *testing.T, s *resourcev1.ResourceSlice) []byte {
	t.Helper()
	meta, err := s.ObjectMeta.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := s.Spec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	spec = protowire.AppendTag(spec, specMixinsField, protowire.BytesType)
	spec = protowire.AppendBytes(spec, []byte("\n\x06common"))
	var msg []byte
	msg = protowire.AppendTag(msg, fieldSliceMetadata, protowire.BytesType)
	msg = protowire.AppendBytes(msg, meta)
	msg = protowire.AppendTag(msg, fieldSliceSpec, protowire.BytesType)
	return protowire.AppendBytes(msg, spec)
}

// jsonWithMixins encodes s as JSON with spec.mixins, which decoding into
// these types drops.
func jsonWithMixins(t *testing.T, s *resourcev1.ResourceSlice) []byte {
	t.Helper()
	s = s.DeepCopy()
	s.APIVersion, s.Kind = "resource.k8s.io/v1", "ResourceSlice"
	b, err := k8sruntime.Encode(scheme.Codecs.LegacyCodec(resourcev1.SchemeGroupVersion), s)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(b), `"spec":{`, `"spec":{"mixins":{"device":[{"name":"common","attributes":{"model":{"string":"h100"}}}]},`, 1)
	if out == string(b) {
		t.Fatal("no spec in the JSON encoding")
	}
	return []byte(out)
}

// A slice decoded from a server whose object holds spec.mixins, in every
// way dractl reads slices (protobuf whole, protobuf for pool checks, JSON,
// and through the monitor's informer transform), is held by the State in
// an invalid pool that names the field, and nothing is allocated from it.
// Without the record in managedFields the same bytes decode into a slice
// that is allocated from: the decoders alone say nothing.
func TestSkewedSliceIsNeverAllocatedFrom(t *testing.T) {
	decoders := map[string]func(t *testing.T, s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice{
		"protobuf": func(t *testing.T, s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
			out := new(resourcev1.ResourceSlice)
			if err := out.Unmarshal(protobufWithMixins(t, s)); err != nil {
				t.Fatal(err)
			}
			return out
		},
		"protobuf, pool fields": func(t *testing.T, s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
			out, err := newPoolDecoder().decode(protobufWithMixins(t, s))
			if err != nil {
				t.Fatal(err)
			}
			return out
		},
		"json, trimmed as the monitor's informer does": func(t *testing.T, s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
			obj, err := k8sruntime.Decode(scheme.Codecs.UniversalDeserializer(), jsonWithMixins(t, s))
			if err != nil {
				t.Fatal(err)
			}
			out := obj.(*resourcev1.ResourceSlice)
			TrimToPool(out)
			return out
		},
	}
	for name, decode := range decoders {
		for _, recorded := range []bool{true, false} {
			s := decode(t, skewed(recorded))
			st := state.New(state.Options{})
			if err := st.SetSlice(s); err != nil {
				t.Fatal(err)
			}
			if err := st.SetClass(at.Class("gpu", `device.driver == "gpu.example.com"`)); err != nil {
				t.Fatal(err)
			}
			claim := at.Claim("c").Request(at.Request("gpu", "gpu")).Obj()
			snap := st.Snapshot()
			_, err := snap.Cycle([]*resourcev1.ResourceClaim{claim}, state.CycleOptions{}).Allocate(context.Background(), at.Node("node-1"))
			u := snap.Usage(pool.ID{Driver: "gpu.example.com", Pool: "node-1"})
			if !recorded {
				if err != nil || u.Invalid != nil {
					t.Errorf("%s, not recorded: err %v, invalid %v; want the device allocated", name, err, u.Invalid)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s: allocated from a slice read without its spec.mixins", name)
			}
			if u.Invalid == nil || !strings.Contains(u.Invalid.Error(), "spec.mixins: Forbidden") {
				t.Errorf("%s: pool invalid = %v, want it to name spec.mixins", name, u.Invalid)
			}
			if got := len(s.ManagedFields); got != 1 && name != "protobuf" {
				t.Errorf("%s: %d managedFields entries kept, want only the one naming spec.mixins", name, got)
			}
		}
	}
}
