package monitor

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/ops/live"
)

// largestSlice is a ResourceSlice at resource.k8s.io/v1's limits: 128
// devices, each with 32 attributes and capacities whose strings are as
// long as allowed, unique to node so that nothing is shared between
// nodes by accident.
func largestSlice(node string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-slice"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To(node),
		Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
	}}
	for d := range resourcev1.ResourceSliceMaxDevices {
		dev := resourcev1.Device{Name: fmt.Sprintf("dev-%d", d),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{},
			Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}}
		for a := range resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice - 1 {
			v := fmt.Sprintf("%s-%d-%d-", node, d, a)
			v += strings.Repeat("x", resourcev1.DeviceAttributeMaxValueLength-len(v))
			dev.Attributes[resourcev1.QualifiedName(fmt.Sprintf("attr-%02d-%s", a, strings.Repeat("a", 20)))] = resourcev1.DeviceAttribute{StringValue: ptr.To(v)}
		}
		dev.Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("80Gi")}
		s.Spec.Devices = append(s.Spec.Devices, dev)
	}
	return s
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestLargestSlicesStayBounded: the largest slices v1 allows, one pool
// each, cost the monitor (its informer's trimmed copy and its State) less
// memory than the objects themselves: what an attribute holds, however
// long, is not kept, so a hostile driver cannot grow the monitor beyond
// what the pool checks need. The pools are checked and served all the
// same.
func TestLargestSlicesStayBounded(t *testing.T) {
	const n = 100
	before := heap()
	raw := make([]*resourcev1.ResourceSlice, n)
	for i := range raw {
		raw[i] = largestSlice(fmt.Sprintf("raw-node-%d", i))
	}
	perObject := float64(heap()-before) / n
	runtime.KeepAlive(raw)
	raw = nil

	m, _, _ := newTestMonitor(t, time.Minute)
	transform := trim(live.NewSharer())
	before = heap()
	for i := range n {
		obj, err := transform(largestSlice(fmt.Sprintf("node-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		m.setSlice(obj.(*resourcev1.ResourceSlice))
	}
	m.sync()
	perSlice := float64(int64(heap())-int64(before)) / n
	t.Logf("a slice at v1's limits: %.0f KiB as an object, %.0f KiB in the monitor", perObject/1024, perSlice/1024)
	if perSlice > perObject/10 {
		t.Errorf("the monitor keeps %.0f KiB per slice, more than a tenth of the object's %.0f KiB: attributes are not dropped", perSlice/1024, perObject/1024)
	}
	m.mu.RLock()
	pools := len(m.current)
	devices := 0
	for _, p := range m.current {
		devices += len(p.usage.Devices)
	}
	m.mu.RUnlock()
	if pools != n || devices != n*resourcev1.ResourceSliceMaxDevices {
		t.Errorf("%d pools with %d devices, want %d with %d", pools, devices, n, n*resourcev1.ResourceSliceMaxDevices)
	}
}
