package live

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
)

// A slice decoded for pool checks is the slice TrimToPool leaves: nothing
// else is lost, whatever the slice holds, and whatever the slices decoded
// before it (one decoder reads them all, sharing what they have in
// common).
func TestPoolFieldsDropOnlyAttributesAndManagedFields(t *testing.T) {
	dec := newPoolDecoder()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 1))
		s, err := api.ToUpstream(testgen.Slice(r, testgen.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		s.Labels = map[string]string{"seed": "x"}
		s.ResourceVersion = "17"
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "driver", Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
		raw, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec.decode(raw)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		want := decoded(t, raw)
		TrimToPool(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: pruned slice differs (-want +got):\n%s", seed, diff)
		}
	}
}

// A device whose length prefix needs fewer bytes once its attributes are
// gone (2 bytes before, 1 after) still decodes.
func TestPoolFieldsShortenLengthPrefixes(t *testing.T) {
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
	dec := newPoolDecoder()
	got, err := dec.decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.out) >= len(raw)-200 {
		t.Errorf("decoded %d bytes of %d, want the attribute gone", len(dec.out), len(raw))
	}
	want := decoded(t, raw)
	TrimToPool(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, n := range []int{1, 5, len(raw) / 2, len(raw) - 1} {
		if _, err := dec.decode(raw[:n]); err == nil {
			t.Errorf("a slice cut after %d of %d bytes was decoded without an error", n, len(raw))
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

// Slices of two nodes of one model share their counter sets, each
// partition's capacities and counter consumption and the device names;
// what differs (the node, a device's taint) is not shared.
func TestPoolFieldsShareWhatSlicesHaveInCommon(t *testing.T) {
	counters := map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("80Gi")}, "slice-0": {Value: resource.MustParse("1")}}
	slice := func(node string, taint bool) []byte {
		s := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
				NodeName:       ptr.To(node),
				SharedCounters: []resourcev1.CounterSet{{Name: "gpu-0", Counters: counters}},
				Devices: []resourcev1.Device{{
					Name:     "gpu-0-mig-0",
					Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("10Gi")}},
					ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0",
						Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("10Gi")}, "slice-0": {Value: resource.MustParse("1")}}}},
				}}},
		}
		if taint {
			s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
		raw, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	dec := newPoolDecoder()
	a, err := dec.decode(slice("node-a", false))
	if err != nil {
		t.Fatal(err)
	}
	b, err := dec.decode(slice("node-b", true))
	if err != nil {
		t.Fatal(err)
	}
	da, db := &a.Spec.Devices[0], &b.Spec.Devices[0]
	same := func(what string, x, y any) {
		t.Helper()
		if reflect.ValueOf(x).Pointer() != reflect.ValueOf(y).Pointer() {
			t.Errorf("%s: not shared", what)
		}
	}
	same("capacity", da.Capacity, db.Capacity)
	same("consumesCounters", da.ConsumesCounters, db.ConsumesCounters)
	same("sharedCounters", a.Spec.SharedCounters, b.Spec.SharedCounters)
	same("device name", unsafe.StringData(da.Name), unsafe.StringData(db.Name))
	if *a.Spec.NodeName == *b.Spec.NodeName || len(da.Taints) != 0 || len(db.Taints) != 1 {
		t.Errorf("what differs was shared: nodes %s and %s, taints %v and %v", *a.Spec.NodeName, *b.Spec.NodeName, da.Taints, db.Taints)
	}
	if got := db.ConsumesCounters[0].Counters["memory"].Value; got.String() != "10Gi" {
		t.Errorf("consumed memory %s, want 10Gi", got.String())
	}
	if n := len(dec.sharedCapacities) + len(dec.sharedConsumes) + len(dec.sharedSets); n != 3 {
		t.Errorf("%d values decoded, want 3 (one of each kind)", n)
	}
}

// Sharing what decoded slices hold alike changes no slice: each is equal
// to what it was, whatever the slices shared before; and a slice equal to
// one shared before holds that one's values.
func TestSharerKeepsEverySliceEqual(t *testing.T) {
	sh := NewSharer()
	first := map[uint64]*resourcev1.ResourceSlice{}
	shared := 0
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed%50, 1)) // every slice comes up six times
		s, err := api.ToUpstream(testgen.Slice(r, testgen.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		want := s.DeepCopy()
		sh.Share(s)
		if diff := cmp.Diff(want, s); diff != "" {
			t.Fatalf("seed %d: shared slice differs (-want +got):\n%s", seed, diff)
		}
		f := first[seed%50]
		if f == nil {
			first[seed%50] = s
			continue
		}
		for i := range s.Spec.Devices {
			if c := s.Spec.Devices[i].Capacity; c != nil {
				if reflect.ValueOf(c).Pointer() != reflect.ValueOf(f.Spec.Devices[i].Capacity).Pointer() {
					t.Fatalf("seed %d: device %d's capacities are not those of the equal slice shared before", seed, i)
				}
				shared++
			}
		}
	}
	if shared == 0 {
		t.Error("no capacities were shared")
	}
}
