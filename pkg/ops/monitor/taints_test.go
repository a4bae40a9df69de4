package monitor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// taintedSlice is one complete pool of n devices, the first tainted of
// them with taint.
func taintedSlice(n, tainted int, taint resourcev1.DeviceTaint) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpus"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To("node-1"),
		Pool: resourcev1.ResourcePool{Name: "node-1", Generation: 1, ResourceSliceCount: 1},
	}}
	for i := range n {
		d := resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i), Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("40Gi")}}}
		if i < tainted {
			d.Taints = []resourcev1.DeviceTaint{taint}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

// TestTaintedDevicesReported: devices that get a NoSchedule or NoExecute
// taint are one Warning on their slice, naming them (a long list cut
// short); an informational taint is none; the taint's going is one Normal
// Event; nothing repeats while nothing changes. The pool's tainted-device
// metric follows.
func TestTaintedDevicesReported(t *testing.T) {
	m, _, rec := newTestMonitor(t, time.Minute)
	unhealthy := resourcev1.DeviceTaint{Key: "dractl.dev/unhealthy", Value: "XID-79", Effect: resourcev1.DeviceTaintEffectNoSchedule}
	info := resourcev1.DeviceTaint{Key: "dractl.dev/health-event", Value: "XID-13", Effect: resourcev1.DeviceTaintEffectNone}
	clean := taintedSlice(12, 0, unhealthy)
	m.setSlice(clean)
	m.sync()
	if e := next(rec); e != "" {
		t.Fatalf("an untainted pool reported: %s", e)
	}
	noticed := taintedSlice(12, 3, info)
	m.updateSlice(clean, noticed)
	m.sync()
	if e := next(rec); e != "" {
		t.Fatalf("an informational taint reported: %s", e)
	}

	sick := taintedSlice(12, 10, unhealthy)
	m.updateSlice(noticed, sick)
	m.sync()
	want := "Warning DeviceTainted devices gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7 and 2 more of pool gpu.example.com/node-1 tainted: " +
		"the scheduler allocates them only to claims tolerating dractl.dev/unhealthy=XID-79:NoSchedule"
	if e := next(rec); e != want {
		t.Fatalf("tainted:\n got %q\nwant %q", e, want)
	}
	if got := taintedLine(t, m); got != `dractl_pool_devices_tainted{driver="gpu.example.com",pool="node-1"} 10` {
		t.Errorf("metric: %s", got)
	}
	m.sync()
	if e := next(rec); e != "" {
		t.Fatalf("reported twice: %s", e)
	}

	well := taintedSlice(12, 0, unhealthy)
	m.updateSlice(sick, well)
	m.sync()
	if e := next(rec); !strings.HasPrefix(e, "Normal DeviceUntainted devices gpu-0, gpu-1") || !strings.HasSuffix(e, "no longer tainted dractl.dev/unhealthy=XID-79:NoSchedule") {
		t.Fatalf("untainted: %q", e)
	}
	if e := next(rec); e != "" {
		t.Fatalf("one more Event: %s", e)
	}
}

// taintedLine is the monitor's dractl_pool_devices_tainted line.
func taintedLine(t *testing.T, m *Monitor) string {
	t.Helper()
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, st := range m.current {
		for _, l := range strings.Split(string(st.series[famTainted]), "\n") {
			if strings.HasPrefix(l, MetricDevicesTainted+"{") {
				return l
			}
		}
	}
	return ""
}
