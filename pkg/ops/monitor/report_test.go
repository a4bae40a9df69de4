package monitor

import (
	"reflect"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/ops/live"
)

func slice(name string, count int64, counters bool) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To("node-1"),
		Pool: resourcev1.ResourcePool{Name: "node-1", Generation: 1, ResourceSliceCount: count},
	}}
	if counters {
		s.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "gpu-0", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("40Gi")}}}}
	} else {
		s.Spec.Devices = []resourcev1.Device{{Name: "part-0", ConsumesCounters: []resourcev1.DeviceCounterConsumption{{
			CounterSet: "gpu-0", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("10Gi")}}}}}}
	}
	return s
}

// next returns the next recorded event, or "" when none was recorded.
func next(rec *events.FakeRecorder) string {
	select {
	case e := <-rec.Events:
		return e
	default:
		return ""
	}
}

// The informers are never started here: the test feeds the handlers and
// runs the sync loop's body itself, with a fake clock.
func newTestMonitor(t *testing.T, grace time.Duration) (*Monitor, *testingclock.FakeClock, *events.FakeRecorder) {
	clk := testingclock.NewFakeClock(time.Unix(1e9, 0))
	rec := events.NewFakeRecorder(10)
	m, err := New(Options{Client: fake.NewClientset(), IncompleteGrace: grace, Clock: clk, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	m.SetLeading(true)
	return m, clk, rec
}

// setSlice, updateSlice and deleteSlice deliver informer events to the
// monitor's handlers.
func (m *Monitor) setSlice(s *resourcev1.ResourceSlice) {
	m.sliceDeltas.Handler(m.logger).OnAdd(s, false)
}
func (m *Monitor) updateSlice(old, s *resourcev1.ResourceSlice) {
	m.sliceDeltas.Handler(m.logger).OnUpdate(old, s)
}
func (m *Monitor) deleteSlice(s *resourcev1.ResourceSlice) {
	m.sliceDeltas.Handler(m.logger).OnDelete(s)
}

func TestIncompletePoolReportedAfterGraceThenRecovered(t *testing.T) {
	m, clk, rec := newTestMonitor(t, time.Minute)
	m.setSlice(slice("counters", 2, true))
	m.sync()
	if e := next(rec); e != "" {
		t.Fatalf("reported at once: %s", e)
	}
	if d := m.nextDeadline(); !d.Equal(clk.Now().Add(time.Minute)) {
		t.Errorf("next wake-up %v, want the end of the grace period", d)
	}
	clk.Step(59 * time.Second)
	m.sync()
	if e := next(rec); e != "" {
		t.Fatalf("reported within the grace period: %s", e)
	}
	clk.Step(time.Second)
	m.sync()
	if e := next(rec); !strings.HasPrefix(e, "Warning PoolIncomplete pool gpu.example.com/node-1 has been incomplete for 1m0s") {
		t.Fatalf("after the grace period: %q", e)
	}
	m.sync()
	if e := next(rec); e != "" {
		t.Fatalf("reported twice: %s", e)
	}
	m.setSlice(slice("devices", 2, false))
	m.sync()
	if e := next(rec); !strings.HasPrefix(e, "Normal PoolRecovered pool gpu.example.com/node-1 is complete and valid again") {
		t.Fatalf("after repair: %q", e)
	}
}

func TestInvalidPoolReportedAtOnceAndOnlyByTheLeader(t *testing.T) {
	m, _, rec := newTestMonitor(t, time.Hour)
	m.SetLeading(false)
	m.setSlice(slice("devices", 1, false)) // consumes gpu-0, which nobody publishes
	m.sync()
	if e := next(rec); e != "" {
		t.Fatalf("a replica that does not lead reported: %s", e)
	}
	if got := m.current[0].condition; got != "invalid" {
		t.Fatalf("condition %s, want invalid (metrics are served by every replica)", got)
	}
	m.SetLeading(true)
	m.sync()
	e := next(rec)
	if !strings.HasPrefix(e, "Warning PoolInvalid pool gpu.example.com/node-1 is invalid") || !strings.Contains(e, `Not found: "gpu-0"`) {
		t.Fatalf("new leader: %q", e)
	}
	m.deleteSlice(slice("devices", 1, false))
	m.sync()
	if e := next(rec); e != "" || len(m.tracked) != 0 {
		t.Fatalf("a deleted pool is reported (%q) or still tracked (%d)", e, len(m.tracked))
	}
}

func TestSyncRecomputesOnlyChangedPools(t *testing.T) {
	m, _, _ := newTestMonitor(t, time.Hour)
	a := slice("a", 1, true)
	b := slice("b", 1, true)
	b.Spec.Pool.Name = "node-2"
	m.setSlice(a)
	m.setSlice(b)
	m.sync()
	before := map[string]any{}
	for _, s := range m.current {
		before[s.usage.ID.Pool] = s.usage
	}
	b2 := b.DeepCopy()
	b2.Spec.SharedCounters[0].Name = "gpu-1"
	m.updateSlice(b, b2)
	m.sync()
	for _, s := range m.current {
		same := before[s.usage.ID.Pool] == any(s.usage)
		if changed := s.usage.ID.Pool == "node-2"; same == changed {
			t.Errorf("pool %s: usage reused %v, want reused only when unchanged", s.usage.ID.Pool, same)
		}
	}
}

func TestTrimKeepsWhatPoolChecksRead(t *testing.T) {
	s := slice("devices", 1, false)
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "driver"}}
	d := &s.Spec.Devices[0]
	d.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("H100")}}
	d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("10Gi")}}
	other := s.DeepCopy()
	other.Name, other.Spec.Pool.Name = "other", "other"
	transform := trim(live.NewSharer())
	obj, err := transform(s)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*resourcev1.ResourceSlice)
	d = &got.Spec.Devices[0]
	if got.ManagedFields != nil || d.Attributes != nil {
		t.Errorf("managedFields %v, attributes %v: want both dropped", got.ManagedFields, d.Attributes)
	}
	if len(d.Capacity) != 1 || len(d.ConsumesCounters) != 1 || d.Name != "part-0" {
		t.Errorf("device %+v lost what pool checks read", d)
	}
	// Another pool's slice with the same devices keeps one copy of them.
	obj, err = transform(other)
	if err != nil {
		t.Fatal(err)
	}
	od := &obj.(*resourcev1.ResourceSlice).Spec.Devices[0]
	if reflect.ValueOf(od.Capacity).Pointer() != reflect.ValueOf(d.Capacity).Pointer() ||
		&od.ConsumesCounters[0] != &d.ConsumesCounters[0] {
		t.Error("equal capacities and counter consumption of two slices are not shared")
	}
}
