package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/testutil"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/scheduler/schedplugin"
)

// The scheduler's configurations and RBAC, as deployed. No kube-scheduler
// runs here: the configurations that replace it run alone.
const (
	// twoProfiles replaces kube-scheduler: the stock plugin in the
	// default profile, dractl's in dractlProfile.
	twoProfiles = "../deploy/scheduler/config-two-profiles.yaml"
	// oneProfile replaces kube-scheduler with dractl's plugin in the
	// default profile.
	oneProfile = "../deploy/scheduler/config-replace.yaml"
	// besideConfig is the chart's default: dractlProfile alone, beside
	// kube-scheduler, electing through a Lease of its own.
	besideConfig = "../deploy/scheduler/config.yaml"
	rbac         = "../deploy/scheduler/rbac.yaml"
	// dractlProfile is the profile that runs dractl's plugin in
	// config-two-profiles.yaml and in config.yaml; the default profile of
	// config-two-profiles.yaml runs the in-tree one.
	dractlProfile = "dractl"
	stockProfile  = "default-scheduler"
)

// startScheduling starts a control plane with the resourceclaim
// controller and dractl-scheduler (stock and dractl profiles, in place of
// kube-scheduler), which runs as the ServiceAccount of deploy/scheduler
// with exactly its RBAC.
func startScheduling(t testing.TB) *framework.ControlPlane {
	t.Helper()
	return startSchedulingWith(t, nil, twoProfiles)
}

// startSchedulingWith is startScheduling with feature gates set (for
// kube-scheduler too, which runs in this process) and the scheduler
// configuration in configFile.
func startSchedulingWith(t testing.TB, gates map[string]bool, configFile string) *framework.ControlPlane {
	t.Helper()
	cp := framework.StartControlPlane(t, framework.Options{FeatureGates: gates, Components: []framework.Component{framework.ResourceClaimController{}}})
	// The account first: it creates kube-system if the API server has
	// not yet.
	sa := cp.ServiceAccount(t, "kube-system", "dractl-scheduler")
	cp.Apply(t, rbac)
	cp.Start(framework.Scheduler{ConfigFile: configFile, Client: sa})
	return cp
}

// createNodes creates Nodes without kubelets and removes the not-ready
// taint the API server adds to new Nodes, which a node's lifecycle
// controller would remove once its kubelet reports.
func createNodes(t testing.TB, cp *framework.ControlPlane, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := createNode(cp.Context(), cp.Client, name); err != nil {
			t.Fatal(err)
		}
	}
}

// createNode creates a Node that looks ready to the scheduler: room for
// 110 pods and no not-ready taint, which the API server adds to new Nodes
// and a node lifecycle controller would remove once the kubelet reports.
func createNode(ctx context.Context, client kubernetes.Interface, name string) error {
	room := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status.Capacity, n.Status.Allocatable = room, room
	if n, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	n.Spec.Taints = nil
	_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	return err
}

func untaint(t testing.TB, cp *framework.ControlPlane, n *corev1.Node) {
	t.Helper()
	if len(n.Spec.Taints) == 0 {
		return
	}
	room := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")}
	n = n.DeepCopy()
	n.Status.Capacity, n.Status.Allocatable = room, room
	n, err := cp.Client.CoreV1().Nodes().UpdateStatus(cp.Context(), n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = nil
	if _, err := cp.Client.CoreV1().Nodes().Update(cp.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// untaintAll untaints every Node, for Nodes created from manifests.
func untaintAll(t testing.TB, cp *framework.ControlPlane) {
	t.Helper()
	nodes, err := cp.Client.CoreV1().Nodes().List(cp.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		untaint(t, cp, &nodes.Items[i])
	}
}

func createSlices(t testing.TB, cp *framework.ControlPlane, ss ...*api.ResourceSlice) {
	t.Helper()
	for _, s := range ss {
		v, err := api.ToUpstream(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Client.ResourceV1().ResourceSlices().Create(cp.Context(), v, metav1.CreateOptions{}); err != nil {
			t.Fatalf("slice %s: %v", s.Name, err)
		}
	}
}

// h100Nodes creates DGX H100 nodes (8 GPUs, 152 devices) and the NVIDIA
// classes.
func h100Nodes(t testing.TB, cp *framework.ControlPlane, names ...string) {
	t.Helper()
	createNodes(t, cp, names...)
	for _, name := range names {
		n := examplegen.DGXH100Node
		n.Node = name
		n.GPUsPerSlice = 0
		createSlices(t, cp, n.Slices(examplegen.Flat)...)
	}
	for _, c := range examplegen.NVIDIAClasses() {
		if _, err := cp.Client.ResourceV1().DeviceClasses().Create(cp.Context(), c.(*resourcev1.DeviceClass), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

const plainDriver = "plain.example.com"

// plainPool publishes n devices dev-0..dev-(n-1) on node (generation
// gen) and the class "plain".
func plainSlice(node string, gen int64, devices ...string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-plain-g%d", node, gen)},
		Spec: resourcev1.ResourceSliceSpec{Driver: plainDriver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}},
	}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d})
	}
	return s
}

func devNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("dev-%d", i)
	}
	return out
}

func plainClass(t testing.TB, cp *framework.ControlPlane) {
	t.Helper()
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver == '" + plainDriver + "'"}}}}}
	if _, err := cp.Client.ResourceV1().DeviceClasses().Create(cp.Context(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func request(name, class string, count int64, selectors ...string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}}
	for _, s := range selectors {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: s}})
	}
	return r
}

func mig(profile string) string {
	return fmt.Sprintf("device.attributes['%s'].profile == '%s'", examplegen.NVIDIADriver, profile)
}

func createTemplate(t testing.TB, cp *framework.ControlPlane, name string, spec resourcev1.DeviceClaim) {
	t.Helper()
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: spec}}}
	if _, err := cp.Client.ResourceV1().ResourceClaimTemplates("default").Create(cp.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createClaim(t testing.TB, cp *framework.ControlPlane, name string, spec resourcev1.DeviceClaim) {
	t.Helper()
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: resourcev1.ResourceClaimSpec{Devices: spec}}
	if _, err := cp.Client.ResourceV1().ResourceClaims("default").Create(cp.Context(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createClaimPod creates a pod of profile whose claim "gpu" comes from the
// template or names the claim (one of the two is empty). On a real node
// its container prints what it sees of its devices (deviceScript).
func createClaimPod(t testing.TB, cp *framework.ControlPlane, name, profile, template, claim string) {
	t.Helper()
	pc := corev1.PodResourceClaim{Name: "gpu"}
	if template != "" {
		pc.ResourceClaimTemplateName = ptr.To(template)
	} else {
		pc.ResourceClaimName = ptr.To(claim)
	}
	ctr := shellContainer("c", deviceScript)
	ctr.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	createPod(t, cp, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			SchedulerName: profile, HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](5),
			ResourceClaims: []corev1.PodResourceClaim{pc},
			Containers:     []corev1.Container{ctr},
		},
	})
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// holdsFor fails the test if cond stops holding within d.
func holdsFor(t testing.TB, d time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		ok, err := cond(context.Background())
		if err != nil {
			t.Fatalf("checking %s: %v", what, err)
		}
		if !ok {
			t.Fatalf("expected %s for %v: it stopped", what, d)
		}
	}
}

func pods(t testing.TB, cp *framework.ControlPlane) []corev1.Pod {
	t.Helper()
	l, err := cp.Client.CoreV1().Pods("default").List(cp.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func bound(ps []corev1.Pod) int {
	n := 0
	for _, p := range ps {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// waitBound waits until n pods are bound.
func waitBound(t testing.TB, cp *framework.ControlPlane, n int, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return bound(pods(t, cp)) >= n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d pods bound: %v\n%s", n, err, dump(t, cp))
	}
}

// dump describes the pods and claims of "default" for a failure.
func dump(t testing.TB, cp *framework.ControlPlane) string {
	var b strings.Builder
	for _, p := range pods(t, cp) {
		fmt.Fprintf(&b, "pod %s: node %q claims %v\n", p.Name, p.Spec.NodeName, p.Status.ResourceClaimStatuses)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	claims, err := cp.Client.ResourceV1().ResourceClaims("default").List(cp.Context(), metav1.ListOptions{})
	if err == nil {
		for _, c := range claims.Items {
			fmt.Fprintf(&b, "claim %s: allocated %t reservedFor %v\n", c.Name, c.Status.Allocation != nil, c.Status.ReservedFor)
		}
	}
	return b.String()
}

// waitSettled waits until no more pods get bound for quiet, and returns
// how many are.
func waitSettled(t testing.TB, cp *framework.ControlPlane, quiet, timeout time.Duration) int {
	t.Helper()
	last, since := -1, time.Now()
	waitFor(t, timeout, "scheduling to settle", func(context.Context) (bool, error) {
		if n := bound(pods(t, cp)); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet, nil
	})
	return last
}

// checkAllocations fails the test on any double use, overcommitted
// counter or capacity, or invalid placement in the cluster.
func checkAllocations(t testing.TB, cp *framework.ControlPlane) {
	t.Helper()
	problems, err := framework.CheckAllocations(cp.Context(), cp.Client)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("allocations are invalid:\n%s", framework.FormatProblems(problems))
	}
}

func claimOf(t testing.TB, cp *framework.ControlPlane, pod string) *resourcev1.ResourceClaim {
	t.Helper()
	p, err := cp.Client.CoreV1().Pods("default").Get(cp.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := ptr.Deref(p.Spec.ResourceClaims[0].ResourceClaimName, "")
	for _, st := range p.Status.ResourceClaimStatuses {
		name = ptr.Deref(st.ResourceClaimName, name)
	}
	c, err := cp.Client.ResourceV1().ResourceClaims("default").Get(cp.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSchedulerBindsTemplatePods(t *testing.T) {
	cp := startScheduling(t)
	h100Nodes(t, cp, "node-1", "node-2")
	createTemplate(t, cp, "one-mig", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", "mig.nvidia.com", 1, mig("1g.10gb"))}})
	for i := range 6 {
		createClaimPod(t, cp, fmt.Sprintf("pod-%d", i), dractlProfile, "one-mig", "")
	}
	waitBound(t, cp, 6, 40*time.Second)
	for i := range 6 {
		pod := fmt.Sprintf("pod-%d", i)
		c := claimOf(t, cp, pod)
		if !slices.Contains(c.Finalizers, resourcev1.Finalizer) {
			t.Errorf("%s: claim %s has finalizers %v", pod, c.Name, c.Finalizers)
		}
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
			t.Errorf("%s: claim %s allocation %v", pod, c.Name, c.Status.Allocation)
		}
		if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].Name != pod {
			t.Errorf("%s: claim %s reservedFor %v", pod, c.Name, c.Status.ReservedFor)
		}
	}
	checkAllocations(t, cp)
}

// TestExtendedResourceClaim: a pod asking for an extended resource that a
// DeviceClass backs (KEP-5004) is bound to the node whose devices serve
// it, with the claim kube-scheduler creates for it: allocated, reserved
// for the pod, and named in the pod's status with the request that serves
// its container, which is what the kubelet reads.
func TestExtendedResourceClaim(t *testing.T) {
	cp := startScheduling(t)
	createNodes(t, cp, "node-1", "node-2")
	createSlices(t, cp, api.FromUpstream(plainSlice("node-1", 1, devNames(4)...)))
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: resourcev1.DeviceClassSpec{
		Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver == '" + plainDriver + "'"}}},
		ExtendedResourceName: ptr.To("example.com/plain")}}
	if _, err := cp.Client.ResourceV1().DeviceClasses().Create(cp.Context(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rl := corev1.ResourceList{"example.com/plain": resource.MustParse("2")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "default"},
		Spec: corev1.PodSpec{SchedulerName: dractlProfile, Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}},
	}
	if _, err := cp.Client.CoreV1().Pods("default").Create(cp.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, cp, 1, 40*time.Second)
	got, err := cp.Client.CoreV1().Pods("default").Get(cp.Context(), "trainer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "node-1" {
		t.Errorf("bound to %s, want node-1, the node with the devices", got.Spec.NodeName)
	}
	st := got.Status.ExtendedResourceClaimStatus
	if st == nil || len(st.RequestMappings) != 1 {
		t.Fatalf("pod status extendedResourceClaimStatus %+v, want one request mapping", st)
	}
	if m := st.RequestMappings[0]; m.ContainerName != "train" || m.ResourceName != "example.com/plain" || m.RequestName != "container-0-request-0" {
		t.Errorf("mapping %+v", m)
	}
	claim, err := cp.Client.ResourceV1().ResourceClaims("default").Get(cp.Context(), st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" || !metav1.IsControlledBy(claim, got) || claim.GenerateName != "trainer-extended-resources-" {
		t.Errorf("claim metadata %+v: want the pod's extended-resource claim", claim.ObjectMeta)
	}
	if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 2 {
		t.Errorf("claim allocation %+v, want two devices", a)
	}
	if rf := claim.Status.ReservedFor; len(rf) != 1 || rf[0].UID != got.UID {
		t.Errorf("claim reservedFor %v, want the pod", rf)
	}
	checkAllocations(t, cp)
}

// TestMIGClaimOnOneGPU: KEP-4815's claim for several MIG devices of one
// GPU (matchAttribute on the parent GPU) gets them on one GPU, with memory
// slices that do not overlap (checkAllocations adds up the counters).
func TestMIGClaimOnOneGPU(t *testing.T) {
	cp := startScheduling(t)
	h100Nodes(t, cp, "node-1")
	parent := examplegen.NVIDIADriver + "/parentUUID"
	spec := resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{
			request("small", "mig.nvidia.com", 2, mig("1g.10gb")),
			request("medium", "mig.nvidia.com", 1, mig("2g.20gb")),
			request("large", "mig.nvidia.com", 1, mig("3g.40gb")),
		},
		Constraints: []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(parent))}},
	}
	for i := range 4 {
		createClaim(t, cp, fmt.Sprintf("mig-%d", i), spec)
		createClaimPod(t, cp, fmt.Sprintf("pod-%d", i), dractlProfile, "", fmt.Sprintf("mig-%d", i))
	}
	waitBound(t, cp, 4, 2*time.Minute)
	gpus := map[string]bool{}
	for i := range 4 {
		c := claimOf(t, cp, fmt.Sprintf("pod-%d", i))
		gpu := ""
		for _, r := range c.Status.Allocation.Devices.Results {
			g, _, _ := strings.Cut(r.Device, "-mig-")
			if gpu != "" && g != gpu {
				t.Errorf("claim %s spans %s and %s", c.Name, gpu, g)
			}
			gpu = g
		}
		if gpus[gpu] {
			t.Errorf("two claims on %s, whose memory slices cannot hold both", gpu)
		}
		gpus[gpu] = true
	}
	checkAllocations(t, cp)
}

// TestMultiHostTPU: the 4x4 TPU device spans four hosts; the allocation
// carries its node selector and the pod lands on one of them.
func TestMultiHostTPU(t *testing.T) {
	cp := startScheduling(t)
	cp.Apply(t, "../examples/tpu-multihost")
	untaintAll(t, cp)
	createNodes(t, cp, "node-9")
	createClaimPod(t, cp, "tpu", dractlProfile, "", "tpu-4x4")
	waitBound(t, cp, 1, 2*time.Minute)
	c := claimOf(t, cp, "tpu")
	ns := c.Status.Allocation.NodeSelector
	if ns == nil || len(ns.NodeSelectorTerms) != 1 {
		t.Fatalf("allocation node selector %v, want the device's", ns)
	}
	p := pods(t, cp)[0]
	if !slices.Contains([]string{"node-1", "node-2", "node-5", "node-6"}, p.Spec.NodeName) {
		t.Errorf("pod on %s, want one of the 4x4 block's hosts", p.Spec.NodeName)
	}
	checkAllocations(t, cp)
}

// TestUnschedulableExplained: a pod that fits nowhere reads as it would
// under the in-tree plugin, word for word (the same pod under the stock
// profile gets the same PodScheduled message and FailedScheduling note),
// and dractl's per-claim account of what stopped the nodes comes beside
// it, as a DevicesUnavailable event.
func TestUnschedulableExplained(t *testing.T) {
	cp := startScheduling(t)
	h100Nodes(t, cp, "gpu-node")
	createNodes(t, cp, "cpu-node-1", "cpu-node-2")
	for _, name := range []string{"a100", "a100-stock"} {
		createClaim(t, cp, name, resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			request("gpu", "mig.nvidia.com", 1, fmt.Sprintf("device.attributes['%s'].productName == 'NVIDIA A100-SXM4-40GB'", examplegen.NVIDIADriver))}})
	}
	createClaimPod(t, cp, "pod", dractlProfile, "", "a100")
	createClaimPod(t, cp, "stock-pod", stockProfile, "", "a100-stock")
	messages := map[string]string{}
	waitFor(t, 2*time.Minute, "PodScheduled=False on both pods", func(ctx context.Context) (bool, error) {
		for _, p := range pods(t, cp) {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
					messages[p.Name] = c.Message
				}
			}
		}
		return len(messages) == 2, nil
	})
	t.Logf("PodScheduled: %s", messages["pod"])
	if messages["pod"] != messages["stock-pod"] {
		t.Errorf("PodScheduled message under dractl:\n  %s\nunder the in-tree plugin:\n  %s", messages["pod"], messages["stock-pod"])
	}
	if want := "3 cannot allocate all claims"; !strings.Contains(messages["pod"], want) {
		t.Errorf("PodScheduled message %q does not count the nodes by the in-tree reason %q", messages["pod"], want)
	}
	const account = "claim gpu: no devices on 2 nodes; selector matched 0 devices on 1 node"
	waitFor(t, time.Minute, "dractl's account as a DevicesUnavailable event", func(ctx context.Context) (bool, error) {
		evs, err := cp.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool {
			return e.Reason == "DevicesUnavailable" && e.Regarding.Name == "pod" && e.Note == account
		}), nil
	})
}

// TestDeletedPodFreesDevices: the only device goes to the first pod; the
// second waits, explained. Deleting the first pod frees the device once
// the pod has stopped, and the second pod gets it.
//
// A pod bound to a node is deleted gracefully: it stays Terminating, and
// keeps its devices, until its kubelet has stopped the containers, reported
// a terminal phase and removed the pod with a grace period of zero. There
// are no kubelets here, so the test does that part itself, as the kubelet
// does it; the resourceclaim controller then takes the pod out of the
// claim's reservedFor and deallocates (or deletes) the claim.
//
// It runs again with kube-scheduler's SchedulerPreQueueingHints feature,
// where a claim event reaches only the pods that some plugin names for
// it: the deallocation must still bring the waiting pod back. That run
// uses the single-profile configuration, so that no other DRA plugin's
// narrowing stands in for dractl's.
func TestDeletedPodFreesDevices(t *testing.T) {
	t.Run("default", func(t *testing.T) { testDeletedPodFreesDevices(t, nil, twoProfiles, dractlProfile) })
	t.Run("SchedulerPreQueueingHints", func(t *testing.T) {
		testDeletedPodFreesDevices(t, map[string]bool{"SchedulerPreQueueingHints": true}, oneProfile, stockProfile)
	})
}

func testDeletedPodFreesDevices(t *testing.T, gates map[string]bool, configFile, profile string) {
	cp := startSchedulingWith(t, gates, configFile)
	for gate, on := range gates {
		if framework.Enabled(gate) != on {
			t.Fatalf("feature gate %s is not %t in this process", gate, on)
		}
	}
	createNodes(t, cp, "node-1")
	plainClass(t, cp)
	v := plainSlice("node-1", 1, "only")
	if _, err := cp.Client.ResourceV1().ResourceSlices().Create(cp.Context(), v, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createTemplate(t, cp, "one", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", "plain", 1)}})
	createClaimPod(t, cp, "first", profile, "one", "")
	waitBound(t, cp, 1, 2*time.Minute)
	firstClaim := claimOf(t, cp, "first")
	createClaimPod(t, cp, "second", profile, "one", "")
	waitFor(t, time.Minute, "the second pod to be unschedulable", func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods("default").Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "cannot allocate all claims") {
				return true, nil
			}
		}
		return false, nil
	})

	podClient := cp.Client.CoreV1().Pods("default")
	if err := podClient.Delete(cp.Context(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	first, err := podClient.Get(cp.Context(), "first", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the first pod is gone at once: %v; a bound pod should be Terminating until its kubelet confirms", err)
	}
	if first.DeletionTimestamp == nil {
		t.Fatal("the first pod has no deletionTimestamp after its deletion")
	}
	holdsFor(t, 3*time.Second, "the terminating pod to keep its device", func(ctx context.Context) (bool, error) {
		second, err := podClient.Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c, err := cp.Client.ResourceV1().ResourceClaims("default").Get(ctx, firstClaim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return second.Spec.NodeName == "" && c.Status.Allocation != nil && len(c.Status.ReservedFor) == 1, nil
	})

	// The kubelet's part: the containers have stopped.
	first.Status.Phase = corev1.PodFailed
	if _, err := podClient.UpdateStatus(cp.Context(), first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := podClient.Delete(cp.Context(), "first", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(first.UID))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the second pod to be bound", func(ctx context.Context) (bool, error) {
		p, err := podClient.Get(ctx, "second", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "node-1", err
	})
	if c := claimOf(t, cp, "second"); c.Status.Allocation.Devices.Results[0].Device != "only" {
		t.Errorf("second pod got %v", c.Status.Allocation.Devices.Results)
	}
	c, err := cp.Client.ResourceV1().ResourceClaims("default").Get(cp.Context(), firstClaim.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0:
		t.Errorf("the first pod's claim is still allocated (%v) or reserved (%v)", c.Status.Allocation, c.Status.ReservedFor)
	}
	checkAllocations(t, cp)
	if gates["SchedulerPreQueueingHints"] {
		// Claim events were narrowed to named pods, and the deallocation
		// went to all (kube-scheduler records these counts asynchronously).
		waitFor(t, 30*time.Second, "dractl's PreQueueingHint evaluations", func(context.Context) (bool, error) {
			narrowed, err := testutil.GetCounterMetricValue(schedmetrics.PreQueueingHintEvaluations.WithLabelValues(schedplugin.Name, "narrowed"))
			if err != nil {
				return false, err
			}
			all, err := testutil.GetCounterMetricValue(schedmetrics.PreQueueingHintEvaluations.WithLabelValues(schedplugin.Name, "all_pods"))
			return narrowed > 0 && all > 0, err
		})
	}
}

// TestSlicesUpdatedMidRun: while pods are being scheduled, the pool is
// republished with a new generation that drops a device. No device may
// be used twice and the new generation's devices all get used.
func TestSlicesUpdatedMidRun(t *testing.T) {
	cp := startScheduling(t)
	createNodes(t, cp, "node-1")
	plainClass(t, cp)
	old := plainSlice("node-1", 1, devNames(10)...)
	if _, err := cp.Client.ResourceV1().ResourceSlices().Create(cp.Context(), old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createTemplate(t, cp, "one", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", "plain", 1)}})
	for i := range 20 {
		createClaimPod(t, cp, fmt.Sprintf("pod-%d", i), dractlProfile, "one", "")
	}
	waitBound(t, cp, 3, 2*time.Minute)
	// Generation 2 without dev-9, then the old slice goes.
	if _, err := cp.Client.ResourceV1().ResourceSlices().Create(cp.Context(), plainSlice("node-1", 2, devNames(9)...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.ResourceV1().ResourceSlices().Delete(cp.Context(), old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n := waitSettled(t, cp, 10*time.Second, 3*time.Minute)
	// Every device of generation 2 is used; dev-9 only if it was taken
	// before the update.
	if n < 9 || n > 10 {
		t.Errorf("%d pods bound, want 9 (10 if dev-9 went before the update)", n)
	}
	checkAllocations(t, cp)
}

// TestProfilesNeverDoubleAllocate: the stock and the dractl profile race
// for the same devices in one scheduler; together they place exactly one
// pod per device.
func TestProfilesNeverDoubleAllocate(t *testing.T) {
	cp := startScheduling(t)
	createNodes(t, cp, "node-1", "node-2", "node-3")
	plainClass(t, cp)
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		if _, err := cp.Client.ResourceV1().ResourceSlices().Create(cp.Context(), plainSlice(n, 1, devNames(10)...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	spec := resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", "plain", 1)}}
	for i := range 60 {
		profile := stockProfile
		if i%2 == 1 {
			profile = dractlProfile
		}
		createClaim(t, cp, fmt.Sprintf("claim-%d", i), spec)
		createClaimPod(t, cp, fmt.Sprintf("pod-%d", i), profile, "", fmt.Sprintf("claim-%d", i))
	}
	waitBound(t, cp, 30, 3*time.Minute)
	if n := waitSettled(t, cp, 10*time.Second, 3*time.Minute); n != 30 {
		t.Errorf("%d pods bound for 30 devices", n)
	}
	byProfile := map[string]int{}
	for _, p := range pods(t, cp) {
		if p.Spec.NodeName != "" {
			byProfile[p.Spec.SchedulerName]++
		}
	}
	if byProfile[stockProfile] == 0 || byProfile[dractlProfile] == 0 {
		t.Errorf("bound per profile %v: both profiles should have placed pods", byProfile)
	}
	checkAllocations(t, cp)
}
