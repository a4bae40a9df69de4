package decode

import (
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/core/api"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func exact(mode resourcev1.DeviceAllocationMode, count int64, ops ...resourcev1.DeviceTolerationOperator) *resourcev1.ExactDeviceRequest {
	e := &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: mode, Count: count}
	for _, op := range ops {
		e.Tolerations = append(e.Tolerations, resourcev1.DeviceToleration{Key: "k", Operator: op})
	}
	return e
}

func sub(mode resourcev1.DeviceAllocationMode, count int64, ops ...resourcev1.DeviceTolerationOperator) resourcev1.DeviceSubRequest {
	e := exact(mode, count, ops...)
	return resourcev1.DeviceSubRequest{Name: "s", DeviceClassName: e.DeviceClassName, AllocationMode: mode, Count: count, Tolerations: e.Tolerations}
}

const (
	exactCount = resourcev1.DeviceAllocationModeExactCount
	all        = resourcev1.DeviceAllocationModeAll
	equal      = resourcev1.DeviceTolerationOpEqual
	exists     = resourcev1.DeviceTolerationOpExists
)

func TestDefaultsClaimRequests(t *testing.T) {
	tests := []struct {
		name    string
		in, out resourcev1.DeviceRequest
	}{
		{"mode and count unset", resourcev1.DeviceRequest{Exactly: exact("", 0)}, resourcev1.DeviceRequest{Exactly: exact(exactCount, 1)}},
		{"count kept", resourcev1.DeviceRequest{Exactly: exact("", 4)}, resourcev1.DeviceRequest{Exactly: exact(exactCount, 4)}},
		{"explicit ExactCount without count", resourcev1.DeviceRequest{Exactly: exact(exactCount, 0)}, resourcev1.DeviceRequest{Exactly: exact(exactCount, 1)}},
		{"All gets no count", resourcev1.DeviceRequest{Exactly: exact(all, 0)}, resourcev1.DeviceRequest{Exactly: exact(all, 0)}},
		{"All with count left for validation", resourcev1.DeviceRequest{Exactly: exact(all, 3)}, resourcev1.DeviceRequest{Exactly: exact(all, 3)}},
		{"unknown mode untouched", resourcev1.DeviceRequest{Exactly: exact("Some", 0)}, resourcev1.DeviceRequest{Exactly: exact("Some", 0)}},
		{"toleration operator", resourcev1.DeviceRequest{Exactly: exact(exactCount, 1, "", exists)}, resourcev1.DeviceRequest{Exactly: exact(exactCount, 1, equal, exists)}},
		{"firstAvailable subrequests",
			resourcev1.DeviceRequest{FirstAvailable: []resourcev1.DeviceSubRequest{sub("", 0, ""), sub(all, 0), sub("", 2, exists)}},
			resourcev1.DeviceRequest{FirstAvailable: []resourcev1.DeviceSubRequest{sub(exactCount, 1, equal), sub(all, 0), sub(exactCount, 2, exists)}}},
		{"neither set", resourcev1.DeviceRequest{}, resourcev1.DeviceRequest{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := &resourcev1.ResourceClaim{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{*tt.in.DeepCopy()}}}}
			tmpl := &resourcev1.ResourceClaimTemplate{Spec: resourcev1.ResourceClaimTemplateSpec{Spec: *claim.Spec.DeepCopy()}}
			if !SetDefaults(claim) || !SetDefaults(tmpl) {
				t.Fatal("SetDefaults did not recognise the type")
			}
			for what, got := range map[string]resourcev1.DeviceRequest{"claim": claim.Spec.Devices.Requests[0], "template": tmpl.Spec.Spec.Devices.Requests[0]} {
				if !equality.Semantic.DeepEqual(got, tt.out) {
					t.Errorf("%s: got %+v, want %+v", what, got, tt.out)
				}
			}
			again := claim.DeepCopy()
			SetDefaults(again)
			if !equality.Semantic.DeepEqual(again, claim) {
				t.Error("defaulting twice changed the claim")
			}
		})
	}
}

func TestDefaultsAllocationTolerations(t *testing.T) {
	c := &resourcev1.ResourceClaim{Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Tolerations: []resourcev1.DeviceToleration{{Key: "a"}, {Operator: exists}},
		}}},
	}}}
	SetDefaults(c)
	got := c.Status.Allocation.Devices.Results[0].Tolerations
	if got[0].Operator != equal || got[1].Operator != exists {
		t.Errorf("operators = %q, %q; want Equal, Exists", got[0].Operator, got[1].Operator)
	}
}

func TestSetDefaultsOtherTypes(t *testing.T) {
	if SetDefaults(&resourcev1.ResourceSlice{}) {
		t.Error("upstream ResourceSlice is not an Object.Obj type; SetDefaults should refuse it")
	}
	for _, o := range []any{&api.ResourceSlice{}, &resourcev1.DeviceClass{}, &corev1.Node{}, &corev1.Pod{}} {
		if !SetDefaults(o) {
			t.Errorf("SetDefaults(%T) = false", o)
		}
	}
}

// Decoding applies the defaults and the server's other visible effects.
func TestDecodeAppliesDefaults(t *testing.T) {
	in := sliceHead + `  devices:
  - name: a
    taints:
    - {key: k, effect: NoSchedule}
    - {key: k2, effect: NoExecute, timeAdded: "2024-05-01T10:00:00.75Z"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: c
  creationTimestamp: "2024-05-01T10:00:00.5Z"
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: gpu
        tolerations: [{key: k}]
`
	objs, err := Bytes("d.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	set := Group(objs)
	taints := set.Slices[0].Spec.Devices[0].Taints
	if taints[0].TimeAdded != nil {
		t.Errorf("timeAdded invented: %v", taints[0].TimeAdded)
	}
	want := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	if taints[1].TimeAdded == nil || !taints[1].TimeAdded.Equal(&want) {
		t.Errorf("timeAdded = %v, want %v (second precision)", taints[1].TimeAdded, want)
	}
	c := set.Claims[0]
	e := c.Spec.Devices.Requests[0].Exactly
	if e.AllocationMode != exactCount || e.Count != 1 || e.Tolerations[0].Operator != equal {
		t.Errorf("claim request not defaulted: %+v", e)
	}
	if c.Namespace != "default" {
		t.Errorf("claim namespace = %q, want default", c.Namespace)
	}
	if !c.CreationTimestamp.Equal(&want) {
		t.Errorf("creationTimestamp = %v, want %v", c.CreationTimestamp, want)
	}
}

func rl(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

// TestDefaultsPod: what kube-apiserver 1.37 stores for what a pod asks,
// case by case (pkg/apis/core/v1/defaults.go, and the pod-level resources
// completed when the pod is prepared for creation).
func TestDefaultsPod(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	ctr := func(name string, req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	sidecar := func(name string, req, lim corev1.ResourceList) corev1.Container {
		c := ctr(name, req, lim)
		c.RestartPolicy = &always
		return c
	}
	tests := []struct {
		name    string
		in, out corev1.PodSpec
	}{
		{"extended resource in limits only",
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", nil, rl("nvidia.com/gpu", "1"))}},
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("nvidia.com/gpu", "1"), rl("nvidia.com/gpu", "1"))}}},
		{"a class's implicit name in limits",
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", nil, rl("deviceclass.resource.kubernetes.io/gpu.example.com", "2"))}},
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("deviceclass.resource.kubernetes.io/gpu.example.com", "2"), rl("deviceclass.resource.kubernetes.io/gpu.example.com", "2"))}}},
		{"a request kept, a missing one added",
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "500m"), rl("cpu", "1", "example.com/nic", "1"))}},
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "500m", "example.com/nic", "1"), rl("cpu", "1", "example.com/nic", "1"))}}},
		{"init containers and sidecars too",
			corev1.PodSpec{
				InitContainers: []corev1.Container{ctr("init", nil, rl("nvidia.com/gpu", "2")), sidecar("side", nil, rl("nvidia.com/gpu", "1"))},
				Containers:     []corev1.Container{ctr("c", nil, nil)}},
			corev1.PodSpec{
				InitContainers: []corev1.Container{ctr("init", rl("nvidia.com/gpu", "2"), rl("nvidia.com/gpu", "2")), sidecar("side", rl("nvidia.com/gpu", "1"), rl("nvidia.com/gpu", "1"))},
				Containers:     []corev1.Container{ctr("c", nil, nil)}}},
		{"quantities rounded up to milli-units",
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "0.0001"), nil)}, Overhead: rl("memory", "0.0005")},
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "1m"), nil)}, Overhead: rl("memory", "1m")}},
		{"no pod-level resources: none made",
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "1"), nil)}},
			corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "1"), nil)}}},
		// The init container runs beside the sidecar started before it:
		// 3.5 CPUs then, more than the 2.5 the pod uses afterwards.
		{"pod-level requests from the containers' and from the pod's limits",
			corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: rl("cpu", "4", "memory", "8Gi")},
				InitContainers: []corev1.Container{sidecar("side", rl("cpu", "500m"), nil), ctr("init", rl("cpu", "3"), nil)},
				Containers:     []corev1.Container{ctr("a", rl("cpu", "1", "nvidia.com/gpu", "1"), nil), ctr("b", rl("cpu", "1"), nil)}},
			corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: rl("cpu", "4", "memory", "8Gi"), Requests: rl("cpu", "3500m", "memory", "8Gi")},
				InitContainers: []corev1.Container{sidecar("side", rl("cpu", "500m"), nil), ctr("init", rl("cpu", "3"), nil)},
				Containers:     []corev1.Container{ctr("a", rl("cpu", "1", "nvidia.com/gpu", "1"), nil), ctr("b", rl("cpu", "1"), nil)}}},
		{"pod-level limit when every container limits, at least the request",
			corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "3", "memory", "1Gi")},
				Containers: []corev1.Container{ctr("a", nil, rl("cpu", "1", "memory", "2Gi")), ctr("b", nil, rl("cpu", "1"))}},
			corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "3", "memory", "1Gi"), Limits: rl("cpu", "3")},
				Containers: []corev1.Container{ctr("a", rl("cpu", "1", "memory", "2Gi"), rl("cpu", "1", "memory", "2Gi")), ctr("b", rl("cpu", "1"), rl("cpu", "1"))}}},
		{"pod-level hugepages limit from the containers', then its request",
			corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: rl("memory", "1Gi")},
				Containers: []corev1.Container{ctr("a", nil, rl("hugepages-2Mi", "4Mi")), ctr("b", nil, rl("hugepages-2Mi", "2Mi"))}},
			corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: rl("memory", "1Gi", "hugepages-2Mi", "6Mi"), Requests: rl("memory", "1Gi", "hugepages-2Mi", "6Mi")},
				Containers: []corev1.Container{ctr("a", rl("hugepages-2Mi", "4Mi"), rl("hugepages-2Mi", "4Mi")), ctr("b", rl("hugepages-2Mi", "2Mi"), rl("hugepages-2Mi", "2Mi"))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: *tt.in.DeepCopy()}
			if !SetDefaults(pod) {
				t.Fatal("SetDefaults did not recognise a Pod")
			}
			if !equality.Semantic.DeepEqual(pod.Spec, tt.out) {
				t.Errorf("got  %+v\nwant %+v", pod.Spec, tt.out)
			}
			again := pod.DeepCopy()
			SetDefaults(again)
			if !equality.Semantic.DeepEqual(again, pod) {
				t.Error("defaulting twice changed the pod")
			}
		})
	}
}

// TestDefaultsNode: a node's allocatable defaults to its capacity, which
// decides whether a device plugin serves an extended resource.
func TestDefaultsNode(t *testing.T) {
	tests := []struct {
		name    string
		in, out corev1.NodeStatus
	}{
		{"allocatable from capacity", corev1.NodeStatus{Capacity: rl("nvidia.com/gpu", "8", "cpu", "0.0005")}, corev1.NodeStatus{Capacity: rl("nvidia.com/gpu", "8", "cpu", "1m"), Allocatable: rl("nvidia.com/gpu", "8", "cpu", "1m")}},
		{"allocatable kept", corev1.NodeStatus{Capacity: rl("nvidia.com/gpu", "8"), Allocatable: rl("nvidia.com/gpu", "7")}, corev1.NodeStatus{Capacity: rl("nvidia.com/gpu", "8"), Allocatable: rl("nvidia.com/gpu", "7")}},
		{"neither", corev1.NodeStatus{}, corev1.NodeStatus{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{Status: *tt.in.DeepCopy()}
			SetDefaults(n)
			if !equality.Semantic.DeepEqual(n.Status, tt.out) {
				t.Errorf("got %+v, want %+v", n.Status, tt.out)
			}
		})
	}
}
