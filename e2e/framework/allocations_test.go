package framework

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// CheckAllocations must find what it exists to find, or passing it means
// nothing.
func TestCheckAllocationsFindsViolations(t *testing.T) {
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "d", NodeName: ptr.To("n"), Pool: resourcev1.ResourcePool{Name: "p", Generation: 1, ResourceSliceCount: 1},
			SharedCounters: []resourcev1.CounterSet{{Name: "gpu", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("40Gi")}}}},
			Devices: []resourcev1.Device{
				{Name: "whole", ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("40Gi")}}}}},
				{Name: "half", ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("20Gi")}}}}},
			}},
	}
	claim := func(name string, devices ...string) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		c.Status.Allocation = &resourcev1.AllocationResult{}
		for _, d := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "d", Pool: "p", Device: d})
		}
		return c
	}
	pod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
			Spec:   corev1.PodSpec{NodeName: "n", ResourceClaims: []corev1.PodResourceClaim{{Name: "c", ResourceClaimName: ptr.To("c")}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		name   string
		claims []runtime.Object
		want   []string
	}{
		{"valid", []runtime.Object{claim("a", "half")}, nil},
		{"device twice", []runtime.Object{claim("a", "half"), claim("b", "half")}, []string{"device d/p/half held by default/a and default/b"}},
		{"counters", []runtime.Object{claim("a", "whole"), claim("b", "half")}, []string{"counter memory of d/p/gpu: 60Gi used, 40Gi available"}},
		{"bound without its claim", []runtime.Object{pod("x", corev1.PodRunning)}, []string{"pod default/x bound to n, claim c not allocated"}},
		{"bound, not reserved", []runtime.Object{claim("c", "half"), pod("x", corev1.PodPending)}, []string{"pod default/x bound, claim c not reserved for it"}},
		{"terminated, claim released", []runtime.Object{pod("x", corev1.PodSucceeded), pod("y", corev1.PodFailed)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(append(tc.claims, slice)...)
			got, err := CheckAllocations(context.Background(), client)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
}
