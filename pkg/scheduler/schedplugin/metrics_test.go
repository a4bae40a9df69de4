package schedplugin

import (
	"context"
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/coretest"
)

// served reads a series of the plugin from kube-scheduler's registry.
func served(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	coretest.Must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			return value(m)
		}
	}
	t.Fatalf("%s%v not served", name, labels)
	return 0
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// TestMetrics: the extension points count each pending claim's attempt
// and outcome by kind of claim (reserved, written, unschedulable,
// unreserved), the informer events the State applied, the assumptions
// held and the nodes' answers, all served from kube-scheduler's registry.
func TestMetrics(t *testing.T) {
	objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("big", 3), gpuClaim("b", 1))
	c := newCluster(t, nil, objs...)
	ctx := context.Background()
	counter := func(name string, labels ...string) float64 {
		t.Helper()
		var v float64
		var err error
		switch name {
		case MetricAllocationAttempts:
			v, err = testutil.GetCounterMetricValue(allocationAttempts.WithLabelValues(labels...))
		case MetricAllocationOutcomes:
			v, err = testutil.GetCounterMetricValue(allocationOutcomes.WithLabelValues(labels...))
		case MetricStateDeltas:
			v, err = testutil.GetCounterMetricValue(stateDeltas.WithLabelValues(labels...))
		}
		coretest.Must(t, err)
		return v
	}
	// The counters are the process's: what this test adds is measured.
	before := map[string]float64{}
	type series struct {
		name   string
		labels []string
	}
	watched := []series{
		{MetricAllocationAttempts, []string{profile, ClaimKindShared}},
		{MetricAllocationOutcomes, []string{profile, ClaimKindShared, OutcomeReserved}},
		{MetricAllocationOutcomes, []string{profile, ClaimKindShared, OutcomeWritten}},
		{MetricAllocationOutcomes, []string{profile, ClaimKindShared, OutcomeUnschedulable}},
		{MetricAllocationOutcomes, []string{profile, ClaimKindShared, OutcomeUnreserved}},
		{MetricAllocationOutcomes, []string{profile, ClaimKindPod, OutcomeReserved}},
	}
	key := func(s series) string { return s.name + "/" + s.labels[1] + "/" + s.labels[len(s.labels)-1] }
	for _, s := range watched {
		before[key(s)] = counter(s.name, s.labels...)
	}
	delta := func(s series) float64 { return counter(s.name, s.labels...) - before[key(s)] }

	// pod-b's binding fails and is undone; then pod-a is bound; pod-big
	// fits nowhere.
	failing := true
	c.client.PrependReactor("update", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !failing {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(resourcev1.Resource("resourceclaims"), "b", errors.New("claim is being deleted"))
	})
	podB := gpuPod("pod-b", "b")
	cs, node, _ := schedule(t, c, podB, node1)
	if node != "node-1" {
		t.Fatal("pod-b not placed")
	}
	if got := served(t, MetricAssumptions, map[string]string{"profile": profile}); got != 1 {
		t.Errorf("assumptions held %v while pod-b is reserved, want 1", got)
	}
	if st := c.pl.PreBind(ctx, cs, podB, node); st.IsSuccess() {
		t.Fatal("PreBind of pod-b succeeded")
	}
	c.pl.Unreserve(ctx, cs, podB, node)
	if got := served(t, MetricAssumptions, map[string]string{"profile": profile}); got != 0 {
		t.Errorf("assumptions held %v after pod-b's Unreserve, want 0", got)
	}
	failing = false

	podA := gpuPod("pod-a", "a")
	cs, node, _ = schedule(t, c, podA, node1)
	if node != "node-1" {
		t.Fatal("pod-a not placed")
	}
	if st := c.pl.PreBind(ctx, cs, podA, node); !st.IsSuccess() {
		t.Fatal(st)
	}
	big := gpuPod("pod-big", "big")
	cs, node, _ = schedule(t, c, big, node1, node2)
	if node != "" {
		t.Fatal("pod-big placed")
	}
	c.pl.PostFilter(ctx, cs, big, nil)

	for i, want := range []float64{
		3, // attempts: a, big, b
		2, // reserved: a, b
		1, // written: a
		1, // unschedulable: big
		1, // unreserved: b
		0, // no claim owned by its pod
	} {
		s := watched[i]
		if got := delta(s); got != want {
			t.Errorf("%s%v: +%v, want +%v", s.name, s.labels, got, want)
		}
	}
	if got := counter(MetricStateDeltas, profile, "ResourceSlice", "applied"); got < 2 {
		t.Errorf("slice deltas applied: %v, want the cluster's 2 slices at least", got)
	}
	if got := served(t, MetricStateDeltas, map[string]string{"profile": profile, "kind": "DeviceClass", "result": "applied"}); got < 1 {
		t.Errorf("class deltas served: %v", got)
	}
	hits := served(t, MetricMemoizedAnswers, map[string]string{"profile": profile, "result": "hit"})
	misses := served(t, MetricMemoizedAnswers, map[string]string{"profile": profile, "result": "miss"})
	if hits+misses == 0 {
		t.Error("no node answers counted")
	}
	served(t, MetricAssumptionsExpired, map[string]string{"profile": profile})
}

// TestClaimKind: a claim the pod owns, one it names, one reserved for its
// PodGroup and the extended-resource claim are told apart.
func TestClaimKind(t *testing.T) {
	pod := gpuPod("pod", "shared")
	owned := gpuClaim("pod-gpu", 1)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	for _, tc := range []struct {
		pc   podClaim
		want string
	}{
		{podClaim{claim: gpuClaim("shared", 1)}, ClaimKindShared},
		{podClaim{claim: owned}, ClaimKindPod},
		{podClaim{claim: gpuClaim("group", 1), consumer: resourcev1.ResourceClaimConsumerReference{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "g"}}, ClaimKindPodGroup},
		{podClaim{claim: owned, extended: true}, ClaimKindExtendedResource},
	} {
		if got := claimKind(pod, tc.pc); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.pc.claim.Name, got, tc.want)
		}
	}
}
