package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// cpuDriver publishes CPU sets: devices that stand for 16 of their node's
// 64 CPUs each (KEP-5517).
const cpuDriver = "cpu.example.com"

// TestNodeAllocatableResources: under DRANodeAllocatableResources, a
// pod's CPU sets count against its node's CPUs. The same pods run under
// the in-tree plugin (on node-1) and dractl's (on node-2): the first pod
// of each is bound with the same nodeAllocatableResourceClaimStatuses,
// the second (its 33 CPUs over the 31 left) stays pending with the same
// PodScheduled message.
func TestNodeAllocatableResources(t *testing.T) {
	cp := startScheduling(t)
	if !framework.Enabled("DRANodeAllocatableResources") {
		t.Fatal("the control plane runs without DRANodeAllocatableResources")
	}
	createNodes(t, cp, "node-1", "node-2")
	// The API server takes such devices only for nodes that declare the
	// feature, as a kubelet that runs it does.
	for _, name := range []string{"node-1", "node-2"} {
		n, err := cp.Client.CoreV1().Nodes().Get(cp.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.DeclaredFeatures = append(n.Status.DeclaredFeatures, "DRANodeAllocatableResources")
		if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(cp.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sixteen := resource.MustParse("16")
	for _, node := range []string{"node-1", "node-2"} {
		b := at.Slice(node + "-cpus").Driver(cpuDriver).Pool(node).Node(node)
		for i := range 4 {
			b = b.Device(at.Device(at.Name("cpuset", i)).NodeResource(corev1.ResourceCPU,
				resourcev1.NodeAllocatableResource{Mapping: &resourcev1.NodeAllocatableMapping{DeviceMultiplier: &sixteen}}))
		}
		v, err := api.ToUpstream(b.Obj())
		if err != nil {
			t.Fatal(err)
		}
		// Admission reads the node from its informer, which may not have
		// the declared feature yet.
		waitFor(t, 30*time.Second, "slice "+v.Name+" admitted", func(ctx context.Context) (bool, error) {
			_, err := cp.Client.ResourceV1().ResourceSlices().Create(ctx, v, metav1.CreateOptions{})
			if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "does not support DRANodeAllocatableResources") {
				return false, nil
			}
			return err == nil, err
		})
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "cpusets"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + cpuDriver + `"`}}}}}
	if _, err := cp.Client.ResourceV1().DeviceClasses().Create(cp.Context(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	profiles := map[string]string{"node-1": stockProfile, "node-2": dractlProfile}
	for node, profile := range profiles {
		for _, p := range []string{"a", "b"} {
			name := node + "-" + p
			createClaim(t, cp, name, resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("cpus", "cpusets", 2)}})
			createCPUPod(t, cp, name, profile, node)
			if p == "a" {
				waitFor(t, time.Minute, name+" bound", func(ctx context.Context) (bool, error) {
					pod, err := cp.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
					return err == nil && pod.Spec.NodeName != "", err
				})
			}
		}
	}
	statuses := map[string][]corev1.NodeAllocatableResourceClaimStatus{}
	messages := map[string]string{}
	waitFor(t, 2*time.Minute, "the b pods unschedulable", func(ctx context.Context) (bool, error) {
		for _, p := range pods(t, cp) {
			statuses[p.Name] = p.Status.NodeAllocatableResourceClaimStatuses
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
					messages[p.Name] = c.Message
				}
			}
		}
		return messages["node-1-b"] != "" && messages["node-2-b"] != "", nil
	})
	for _, node := range []string{"node-1", "node-2"} {
		st := statuses[node+"-a"]
		if len(st) != 1 || st[0].ResourceClaimName != node+"-a" || len(st[0].Mapping) != 1 || st[0].Mapping[0].Quantity.Cmp(resource.MustParse("32")) != 0 {
			t.Errorf("%s-a (%s): nodeAllocatableResourceClaimStatuses %+v, want 32 CPUs for its claim", node, profiles[node], st)
		}
	}
	a1, a2 := statuses["node-1-a"], statuses["node-2-a"]
	if len(a1) == 1 && len(a2) == 1 {
		a1[0].ResourceClaimName, a2[0].ResourceClaimName = "", ""
		if !equality.Semantic.DeepEqual(a1, a2) {
			t.Errorf("statuses under the in-tree plugin %+v, under dractl's %+v", a1, a2)
		}
	}
	t.Logf("PodScheduled: %s", messages["node-2-b"])
	if messages["node-1-b"] != messages["node-2-b"] {
		t.Errorf("PodScheduled message under the in-tree plugin:\n  %s\nunder dractl's:\n  %s", messages["node-1-b"], messages["node-2-b"])
	}
	for _, p := range pods(t, cp) {
		if p.Name == "node-2-b" && p.Spec.NodeName != "" {
			t.Errorf("node-2-b bound to %s with 33 CPUs asked of the 31 left", p.Spec.NodeName)
		}
	}
	checkAllocations(t, cp)
}

// createCPUPod creates a pod of profile on node whose container asks for
// one CPU and uses the claim of the same name.
func createCPUPod(t testing.TB, cp *framework.ControlPlane, name, profile, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			SchedulerName:  profile,
			NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "cpus", ResourceClaimName: ptr.To(name)}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
					Claims:   []corev1.ResourceClaim{{Name: "cpus"}},
				}}},
		},
	}
	if _, err := cp.Client.CoreV1().Pods("default").Create(cp.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
