package monitor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// regressedTo is s updated to generation gen.
func regressedTo(s *resourcev1.ResourceSlice, gen int64) *resourcev1.ResourceSlice {
	out := s.DeepCopy()
	out.Spec.Pool.Generation = gen
	return out
}

// TestGenerationGoingBackIsReportedOncePerPool: a slice updated to an
// older generation of its pool is a Warning naming the pool and the two
// generations, once per pool however often it happens; a generation that
// grows, as a driver republishing does, is not reported.
func TestGenerationGoingBackIsReportedOncePerPool(t *testing.T) {
	m, _, rec := newTestMonitor(t, time.Minute)
	s := slice("counters", 1, true)
	s.Spec.Pool.Generation = 5
	m.setSlice(s)
	m.sync()

	up := regressedTo(s, 6)
	m.updateSlice(s, up)
	m.sync()
	if e := next(rec); e != "" {
		t.Fatalf("a growing generation reported: %s", e)
	}

	down := regressedTo(up, 3)
	m.updateSlice(up, down)
	m.sync()
	e := next(rec)
	for _, want := range []string{"Warning", ReasonPoolGenerationRegressed, "pool gpu.example.com/node-1", "from generation 6 to 3", "slice counters"} {
		if !strings.Contains(e, want) {
			t.Errorf("event %q lacks %q", e, want)
		}
	}
	m.updateSlice(down, regressedTo(down, 2))
	m.sync()
	if e := next(rec); e != "" {
		t.Errorf("reported twice: %s", e)
	}
}

// TestThousandPoolsGoingBackEverySecond: 1,000 pools whose slices go back
// a generation every second for a minute cost one Event per pool, the
// pools stay tracked one entry each, and the metrics keep serving them.
func TestThousandPoolsGoingBackEverySecond(t *testing.T) {
	const pools, rounds = 1000, 60
	clk := testingclock.NewFakeClock(time.Unix(1e9, 0))
	rec := events.NewFakeRecorder(2 * pools)
	m, err := New(Options{Client: fake.NewClientset(), IncompleteGrace: time.Minute, Clock: clk, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	m.SetLeading(true)
	cur := make([]*resourcev1.ResourceSlice, pools)
	for i := range cur {
		s := slice(fmt.Sprintf("slice-%d", i), 1, true)
		s.Spec.Pool.Name, s.Spec.NodeName = fmt.Sprintf("node-%d", i), ptr.To(fmt.Sprintf("node-%d", i))
		s.Spec.Pool.Generation = rounds + 1
		cur[i] = s
		m.setSlice(s)
	}
	m.sync()
	for r := range rounds {
		for i, s := range cur {
			next := regressedTo(s, int64(rounds-r))
			m.updateSlice(s, next)
			cur[i] = next
		}
		clk.Step(time.Second)
		m.sync()
	}
	if got := len(rec.Events); got != pools {
		t.Errorf("%d Events, want one per pool (%d)", got, pools)
	}
	for range len(rec.Events) {
		if e := <-rec.Events; !strings.Contains(e, ReasonPoolGenerationRegressed) {
			t.Errorf("unexpected event %q", e)
		}
	}
	if len(m.tracked) != pools || len(m.regressed) != 0 {
		t.Errorf("%d pools tracked, %d regressions pending; want %d and 0", len(m.tracked), len(m.regressed), pools)
	}
	m.mu.RLock()
	served := len(m.current)
	m.mu.RUnlock()
	if served != pools {
		t.Errorf("metrics serve %d pools, want %d", served, pools)
	}
}
