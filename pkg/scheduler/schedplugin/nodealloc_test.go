package schedplugin

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// resources is a node's resource counts as the framework reports them.
type resources struct {
	fwk.Resource
	milliCPU, memory int64
}

func (r resources) GetMilliCPU() int64                            { return r.milliCPU }
func (r resources) GetMemory() int64                              { return r.memory }
func (r resources) GetEphemeralStorage() int64                    { return 0 }
func (r resources) GetScalarResources() map[v1.ResourceName]int64 { return nil }

type podInfo struct {
	fwk.PodInfo
	pod *v1.Pod
}

func (p podInfo) GetPod() *v1.Pod { return p.pod }

// sizedNode is a node with allocatable resources, what its pods request
// and the pods the scheduler's cache holds on it.
type sizedNode struct {
	fakeNodeInfo
	allocatable, requested resources
	pods                   []fwk.PodInfo
}

func (n sizedNode) GetAllocatable() fwk.Resource { return n.allocatable }
func (n sizedNode) GetRequested() fwk.Resource   { return n.requested }
func (n sizedNode) GetPods() []fwk.PodInfo       { return n.pods }

// cpuObjects: node-1 has four CPU sets, each standing for 4 CPUs, and a
// NIC whose driver costs 100Mi of memory per pod and 10Mi per container
// (overhead, shareable); classes "cpus" and "nic".
func cpuObjects(t *testing.T) []runtime.Object {
	t.Helper()
	four := resource.MustParse("4")
	b := at.Slice("node-1-cpus").Driver(driver).Pool("node-1").Node("node-1")
	for i := range 4 {
		b = b.Device(at.Device(at.Name("cpuset", i)).Str("kind", "cpuset").
			NodeResource(v1.ResourceCPU, resourcev1.NodeAllocatableResource{Mapping: &resourcev1.NodeAllocatableMapping{DeviceMultiplier: &four}}))
	}
	b = b.Device(at.Device("nic").Str("kind", "nic").Multi().
		NodeResource(v1.ResourceMemory, resourcev1.NodeAllocatableResource{Overhead: &resourcev1.NodeAllocatableOverhead{
			PerPod: ptr.To(resource.MustParse("100Mi")), PerContainer: ptr.To(resource.MustParse("10Mi"))}}))
	v, err := api.ToUpstream(b.Obj())
	at.Must(t, err)
	v.UID = "uid-node-1-cpus"
	return []runtime.Object{v,
		at.Class("cpus", `device.driver == "`+driver+`" && device.attributes["`+driver+`"].kind == "cpuset"`),
		at.Class("nic", `device.driver == "`+driver+`" && device.attributes["`+driver+`"].kind == "nic"`)}
}

func cpuClaim(name string, count int64) *resourcev1.ResourceClaim {
	c := at.Claim(name).Request(at.Request("cpus", "cpus").Count(count)).Obj()
	c.ResourceVersion = "1"
	return c
}

// cpuPod has one container asking for 1 CPU that uses the pod's claim.
func cpuPod(name, claim string) *v1.Pod {
	p := gpuPod(name, claim)
	p.Spec.Containers = []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
		Claims:   []v1.ResourceClaim{{Name: "gpu"}},
	}}}
	return p
}

func cpuNode(requestedCPU int64, pods ...*v1.Pod) sizedNode {
	n := sizedNode{fakeNodeInfo: node1, allocatable: resources{milliCPU: 16000, memory: 64 << 30}, requested: resources{milliCPU: requestedCPU * 1000}}
	for _, p := range pods {
		n.pods = append(n.pods, podInfo{pod: p})
	}
	return n
}

// TestNodeAllocatableResources follows pods whose devices stand for CPUs
// through Filter, Reserve, PreBind and Unreserve (KEP-5517).
func TestNodeAllocatableResources(t *testing.T) {
	podA, podB, podC := cpuPod("pod-a", "a"), cpuPod("pod-b", "b"), cpuPod("pod-c", "c")
	objs := append(cpuObjects(t), cpuClaim("a", 1), cpuClaim("b", 2), cpuClaim("c", 1), podA, podB, podC)
	c := newCluster(t, nil, objs...)
	ctx := context.Background()

	// pod-a: 1 CPU of its own and 4 its CPU set stands for, on a node
	// with 14 of 16 left.
	csA := newCycleState()
	if _, st := c.pl.PreFilter(ctx, csA, podA, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter pod-a: %v", st)
	}
	if st := c.pl.Filter(ctx, csA, podA, cpuNode(2)); !st.IsSuccess() {
		t.Fatalf("Filter pod-a: %v", st)
	}
	at.Must(t, c.pl.Reserve(ctx, csA, podA, "node-1").AsError())
	if st := c.pl.PreBind(ctx, csA, podA, "node-1"); !st.IsSuccess() {
		t.Fatalf("PreBind pod-a: %v", st)
	}
	got, err := c.client.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
	at.Must(t, err)
	sts := got.Status.NodeAllocatableResourceClaimStatuses
	if len(sts) != 1 || sts[0].ResourceClaimName != "a" || len(sts[0].Mapping) != 1 ||
		sts[0].Mapping[0].Name != v1.ResourceCPU || sts[0].Mapping[0].Quantity.Cmp(resource.MustParse("4")) != 0 ||
		len(sts[0].Containers) != 1 || sts[0].Containers[0] != "app" {
		t.Fatalf("pod-a's nodeAllocatableResourceClaimStatuses: %+v", sts)
	}

	// pod-b (1 + 8 CPUs) fits in the 10 left while the cache counts pod-a
	// without its CPU set: the plugin counts it.
	_, node, statuses := schedule(t, c, podB, cpuNode(2))
	if node == "" {
		t.Fatalf("pod-b not placed: %v", statuses)
	}
	// pod-c (1 + 4) does not fit in the 1 left, with kube-scheduler's
	// words; preemption could help.
	_, node, statuses = schedule(t, c, podC, cpuNode(2))
	if node != "" {
		t.Fatalf("pod-c placed although only 1 CPU is left")
	}
	if st := statuses[0]; st.Code() != fwk.Unschedulable || st.Message() != "Insufficient cpu" {
		t.Errorf("pod-c rejected with %v %q, want Unschedulable %q", st.Code(), st.Message(), "Insufficient cpu")
	}

	// Once the cache holds pod-a with its statuses (its 5 CPUs counted in
	// requested), its footprint is not counted twice.
	podA = got
	if _, node, _ := schedule(t, c, podC, cpuNode(7, podA)); node != "" {
		t.Fatalf("pod-c placed with 16-7-9=0 CPUs left")
	}
	if n := len(c.pl.nodeResources.footprints.nodes["node-1"]); n != 1 {
		t.Errorf("footprints on node-1: %d, want pod-b's alone once pod-a is in the cache", n)
	}
	// pod-b never bound: Unreserve frees its CPUs.
	c.pl.nodeResources.footprints.forget(podB.UID)
	if _, node, statuses := schedule(t, c, podC, cpuNode(7, podA)); node != "node-1" {
		t.Fatalf("pod-c not placed after pod-b's footprint was dropped: %v", statuses)
	}
}

// TestNodeAllocatableUnreserveClears: statuses PreBind wrote are cleared
// when the pod is not bound; a pod whose binding may have landed keeps
// them, as it keeps its claims' reservation.
func TestNodeAllocatableUnreserveClears(t *testing.T) {
	podA := cpuPod("pod-a", "a")
	c := newCluster(t, nil, append(cpuObjects(t), cpuClaim("a", 1), podA)...)
	ctx := context.Background()
	cs, node, statuses := schedule(t, c, podA, cpuNode(0))
	if node == "" {
		t.Fatalf("not placed: %v", statuses)
	}
	s, err := readState(cs)
	at.Must(t, err)
	at.Must(t, c.pl.nodeResources.write(ctx, s, podA))
	written := func() int {
		got, err := c.client.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
		at.Must(t, err)
		return len(got.Status.NodeAllocatableResourceClaimStatuses)
	}
	if written() != 1 {
		t.Fatal("statuses not written")
	}
	s.preBound = true
	c.pl.Unreserve(ctx, cs, podA, node)
	if written() != 1 {
		t.Error("Unreserve after a binding of unknown outcome cleared the statuses")
	}
	s.preBound = false
	c.pl.Unreserve(ctx, cs, podA, node)
	if written() != 0 {
		t.Error("Unreserve left the statuses")
	}
	if len(c.pl.nodeResources.footprints.nodes) != 0 {
		t.Errorf("Unreserve left footprints %v", c.pl.nodeResources.footprints.nodes)
	}
}

// TestNodeAllocatableSharing: a claim whose device stands for CPUs is one
// pod's; a claim with overhead only may be shared.
func TestNodeAllocatableSharing(t *testing.T) {
	other := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default", UID: "uid-other"}}
	allocated := func(c *resourcev1.ResourceClaim, device string) *resourcev1.ResourceClaim {
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: c.Spec.Devices.Requests[0].Name, Driver: driver, Pool: "node-1", Device: device}}}}
		c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: other.Name, UID: other.UID}}
		return c
	}
	mapped := allocated(cpuClaim("mapped", 1), "cpuset-0")
	nic := at.Claim("nic").Request(at.Request("nic", "nic")).Obj()
	nic.ResourceVersion = "1"
	nic = allocated(nic, "nic")
	c := newCluster(t, nil, append(cpuObjects(t), mapped, nic)...)

	_, node, statuses := schedule(t, c, cpuPod("pod-a", "mapped"), cpuNode(0))
	want := "node allocatable resource claim mapped has a mapped device and cannot be shared across pods"
	if node != "" || statuses[0].Code() != fwk.UnschedulableAndUnresolvable || statuses[0].Message() != want {
		t.Fatalf("pod sharing the mapped claim: node %q, %v; want rejected with %q", node, statuses, want)
	}
	cs, node, statuses := schedule(t, c, cpuPod("pod-b", "nic"), cpuNode(0))
	if node == "" {
		t.Fatalf("pod sharing the overhead-only claim not placed: %v", statuses)
	}
	s, err := readState(cs)
	at.Must(t, err)
	if got := s.reservedStatuses; len(got) != 1 || len(got[0].Overhead) != 1 || got[0].Overhead[0].PerPod.Cmp(resource.MustParse("100Mi")) != 0 {
		t.Errorf("statuses for the NIC claim: %+v", got)
	}
}

// TestNodeAllocatablePodLevel: pod-level requests must cover what the
// devices add.
func TestNodeAllocatablePodLevel(t *testing.T) {
	pod := cpuPod("pod-a", "a")
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}}
	c := newCluster(t, nil, append(cpuObjects(t), cpuClaim("a", 1), pod)...)
	_, node, statuses := schedule(t, c, pod, cpuNode(0))
	if node != "" || !strings.Contains(statuses[0].Message(), "pod level request for cpu is insufficient") {
		t.Fatalf("pod asking 4 CPUs at pod level, 5 with its CPU set: node %q, %v", node, statuses)
	}
}

// TestNodeAllocatableGateOff: without DRANodeAllocatableResources devices
// are devices only, as in kube-scheduler.
func TestNodeAllocatableGateOff(t *testing.T) {
	pod := cpuPod("pod-a", "a")
	objs := append(cpuObjects(t), cpuClaim("a", 4), pod)
	fts := AllFeatures
	fts.NodeAllocatableResources = false
	c := newClusterWith(t, fts, nil, objs...)
	cs, node, statuses := schedule(t, c, pod, cpuNode(15))
	if node == "" {
		t.Fatalf("not placed with the gate off: %v", statuses)
	}
	s, err := readState(cs)
	at.Must(t, err)
	at.Must(t, c.pl.nodeResources.write(context.Background(), s, pod))
	got, err := c.client.CoreV1().Pods("default").Get(context.Background(), "pod-a", metav1.GetOptions{})
	at.Must(t, err)
	if len(got.Status.NodeAllocatableResourceClaimStatuses) != 0 {
		t.Errorf("statuses written with the gate off: %+v", got.Status.NodeAllocatableResourceClaimStatuses)
	}
}
