package schedplugin

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/podclaims"
	"github.com/dractl/dractl/pkg/core/state"
)

// extendedObjects are gpuObjects with the class "gpu" backing
// example.com/gpu.
func extendedObjects(t *testing.T) []runtime.Object {
	objs := gpuObjects(t)
	for _, o := range objs {
		if c, ok := o.(*resourcev1.DeviceClass); ok && c.Name == "gpu" {
			c.Spec.ExtendedResourceName = ptr.To("example.com/gpu")
		}
	}
	return objs
}

// extendedPod is a pod whose container asks for requests (name,
// quantity, ...), and no claims.
func extendedPod(name string, requests ...string) *v1.Pod {
	rl := v1.ResourceList{}
	for i := 0; i < len(requests); i += 2 {
		rl[v1.ResourceName(requests[i])] = resource.MustParse(requests[i+1])
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{SchedulerName: profile, Containers: []v1.Container{{
			Name: "main", Resources: v1.ResourceRequirements{Requests: rl, Limits: rl},
		}}},
	}
}

// TestExtendedResourceFilter: which nodes fit a pod asking for an
// extended resource a DeviceClass backs, with kube-scheduler's reasons.
func TestExtendedResourceFilter(t *testing.T) {
	c := newCluster(t, nil, extendedObjects(t)...)
	withPlugin := fakeNodeInfo{node: at.Node("node-3"), allocatable: map[v1.ResourceName]int64{"example.com/gpu": 4}}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		node   fakeNodeInfo
		reason string // "" fits
	}{
		{"the node's devices", extendedPod("p", "example.com/gpu", "1"), node1, ""},
		{"the implicit name", extendedPod("p", "deviceclass.resource.kubernetes.io/gpu", "1"), node1, ""},
		{"no devices on the node", extendedPod("p", "example.com/gpu", "1"), node2, reasonCannotAllocate},
		{"more than the node has", extendedPod("p", "example.com/gpu", "3"), node1, reasonCannotAllocate},
		{"the node's device plugin serves it", extendedPod("p", "example.com/gpu", "9"), withPlugin, ""},
		{"a resource nobody serves", extendedPod("p", "example.com/gpu", "1", "example.com/fpga", "1"), node1, reasonCannotFitResource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCycleState()
			if _, st := c.pl.PreFilter(context.Background(), cs, tc.pod, nil); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st)
			}
			st := c.pl.Filter(context.Background(), cs, tc.pod, tc.node)
			switch {
			case tc.reason == "" && !st.IsSuccess():
				t.Errorf("Filter: %v, want the node to fit", st)
			case tc.reason != "" && (st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != tc.reason):
				t.Errorf("Filter: %v, want %q", st, tc.reason)
			}
		})
	}
	// An extended resource no class backs is NodeResourcesFit's alone.
	cs := newCycleState()
	if _, st := c.pl.PreFilter(context.Background(), cs, extendedPod("p", "example.com/fpga", "1"), nil); st.Code() != fwk.Skip {
		t.Errorf("PreFilter of a pod asking for an unbacked resource: %v, want Skip", st)
	}
}

// TestExtendedResourceClaim: Reserve assumes the node's devices for the
// pod, PreBind creates the claim as kube-scheduler does (name, annotation,
// owner, allocation, reservation) and writes the pod's
// extendedResourceClaimStatus.
func TestExtendedResourceClaim(t *testing.T) {
	ctx := context.Background()
	pod := extendedPod("pod-a", "example.com/gpu", "2")
	c := newCluster(t, nil, append(extendedObjects(t), pod)...)
	// The fake API server gives created objects no UID.
	c.client.PrependReactor("create", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*resourcev1.ResourceClaim).UID = "created-uid"
		return false, nil, nil
	})
	cs, node, statuses := schedule(t, c, pod, node2, node1)
	if node != "node-1" {
		t.Fatalf("not placed: %v", statuses)
	}
	s, err := readState(cs)
	at.Must(t, err)
	name := s.ext.name
	if !strings.HasPrefix(name, "pod-a-extended-resources-") || len(name) != len("pod-a-extended-resources-")+5 {
		t.Errorf("claim name %q", name)
	}
	if got := c.tracker.GetPendingAllocation(s.ext.uid); got == nil || len(got.Devices.Results) != 2 {
		t.Fatalf("claim tracker has no allocation of two devices in flight: %v", got)
	}
	// Until PreBind, the next pod sees the devices taken.
	if _, node, _ := schedule(t, c, extendedPod("pod-b", "example.com/gpu", "1"), node1); node != "" {
		t.Fatalf("pod-b placed on %s while pod-a's devices are reserved", node)
	}

	if st := c.pl.PreBind(ctx, cs, pod, node); !st.IsSuccess() {
		t.Fatalf("PreBind: %v", st)
	}
	claim, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
	at.Must(t, err)
	if !podclaims.IsExtendedClaimOf(pod, claim) || claim.GenerateName != "pod-a-extended-resources-" {
		t.Errorf("claim metadata %+v: want the pod's extended-resource claim", claim.ObjectMeta)
	}
	if !slices.Contains(claim.Finalizers, resourcev1.Finalizer) {
		t.Errorf("finalizers %v", claim.Finalizers)
	}
	reqs := claim.Spec.Devices.Requests
	if len(reqs) != 1 || reqs[0].Name != "container-0-request-0" || reqs[0].Exactly.DeviceClassName != "gpu" || reqs[0].Exactly.Count != 2 {
		t.Errorf("requests %+v", reqs)
	}
	if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 2 || a.Devices.Results[0].Request != "container-0-request-0" {
		t.Errorf("allocation %+v", a)
	}
	if rf := claim.Status.ReservedFor; len(rf) != 1 || rf[0].UID != pod.UID {
		t.Errorf("reservedFor %v", rf)
	}
	got, err := c.client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	at.Must(t, err)
	want := &v1.PodExtendedResourceClaimStatus{ResourceClaimName: name, RequestMappings: []v1.ContainerExtendedResourceRequest{
		{ContainerName: "main", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
	if st := got.Status.ExtendedResourceClaimStatus; st == nil || st.ResourceClaimName != want.ResourceClaimName || !slices.Equal(st.RequestMappings, want.RequestMappings) {
		t.Errorf("pod status %+v, want %+v", st, want)
	}
	if c.tracker.GetPendingAllocation(s.ext.uid) != nil {
		t.Error("allocation still in flight after PreBind")
	}
	// The State holds the allocation: still assumed, for the created
	// claim, or observed once the informer delivered the claim.
	if claim.UID != "created-uid" {
		t.Fatalf("claim UID %q", claim.UID)
	}
	if a, ok := c.pl.st.Assumption(state.KeyOf(claim)); ok && a.Claim.UID != claim.UID {
		t.Errorf("State's assumption is of claim %q, want the created claim's", a.Claim.UID)
	} else if obs := c.pl.st.Observed(state.KeyOf(claim)); !ok && (obs == nil || obs.UID != claim.UID || obs.Status.Allocation == nil) {
		t.Errorf("State holds neither an assumption nor the allocated claim: %+v", obs)
	}
	// The devices stay taken until the informer shows the claim, and
	// after.
	if _, node, _ := schedule(t, c, extendedPod("pod-b", "example.com/gpu", "1"), node1); node != "" {
		t.Fatalf("pod-b placed on %s after pod-a's claim was written", node)
	}
}

// TestExtendedResourceUnreserve: a failed binding frees the devices,
// deletes a claim PreBind created, and leaves no placeholder behind; a
// Reserve after Unreserve (a pod group's cycle) works again.
func TestExtendedResourceUnreserve(t *testing.T) {
	ctx := context.Background()
	pod := extendedPod("pod-a", "example.com/gpu", "2")
	c := newCluster(t, nil, append(extendedObjects(t), pod)...)
	cs, node, _ := schedule(t, c, pod, node1)
	if node != "node-1" {
		t.Fatal("not placed")
	}
	s, err := readState(cs)
	at.Must(t, err)
	key := state.ClaimKey{Namespace: "default", Name: s.ext.name}
	c.pl.Unreserve(ctx, cs, pod, node)
	if c.tracker.GetPendingAllocation(s.ext.uid) != nil || c.pl.st.Observed(key) != nil {
		t.Fatal("Unreserve left the allocation in flight or the placeholder in the State")
	}
	if st := c.pl.Reserve(ctx, cs, pod, node); !st.IsSuccess() {
		t.Fatalf("Reserve after Unreserve: %v", st)
	}
	// The pod's status cannot be written: PreBind fails after creating
	// and writing the claim.
	c.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(v1.Resource("pods"), pod.Name, errors.New("no"))
	})
	if st := c.pl.PreBind(ctx, cs, pod, node); st.IsSuccess() {
		t.Fatal("PreBind succeeded without writing the pod's status")
	}
	if _, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, s.ext.name, metav1.GetOptions{}); err != nil {
		t.Fatalf("PreBind did not create the claim: %v", err)
	}
	c.pl.Unreserve(ctx, cs, pod, node)
	if _, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, s.ext.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the created claim survived Unreserve: %v", err)
	}
	if c.tracker.GetPendingAllocation(s.ext.uid) != nil {
		t.Error("allocation still in flight after Unreserve")
	}
}

// TestExtendedResourceStaleClaim: a claim an earlier attempt created is
// not reused: every node rejects the pod and PostFilter deletes it, as
// in-tree.
func TestExtendedResourceStaleClaim(t *testing.T) {
	ctx := context.Background()
	pod := extendedPod("pod-a", "example.com/gpu", "1")
	ext, err := podclaims.ExtendedOf(pod, (&fakeDRA{classes: fakeClasses{classes: map[string]*resourcev1.DeviceClass{
		"gpu": {ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}}}}).DeviceClassResolver())
	at.Must(t, err)
	need, err := ext.OnNode(nil)
	at.Must(t, err)
	stale, _ := ext.Claim(need, podclaims.ExtendedClaimName(pod.Name, "zzzzz"))
	stale.UID, stale.Finalizers = "stale-uid", []string{resourcev1.Finalizer}
	c := newCluster(t, nil, append(extendedObjects(t), pod, stale)...)
	cs, node, statuses := schedule(t, c, pod, node1)
	if node != "" {
		t.Fatalf("placed on %s with a stale extended-resource claim", node)
	}
	if len(statuses) != 1 || statuses[0].Message() != reasonStaleExtended {
		t.Errorf("Filter: %v, want %q", statuses, reasonStaleExtended)
	}
	_, st := c.pl.PostFilter(ctx, cs, pod, nil)
	if st.Message() != "deletion of ResourceClaim completed" {
		t.Errorf("PostFilter: %v", st)
	}
	if _, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, stale.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("stale claim not deleted: %v", err)
	}
	hint, err := c.pl.claims.afterClaimChange(c.pl.feed.logger, pod, stale, nil)
	if err != nil || hint != fwk.Queue {
		t.Errorf("deletion of the stale claim: hint %v, %v; want the pod queued", hint, err)
	}
}

// TestCreatedClaimBeforeCreateReturns: the informer may deliver the claim
// PreBind created before the create returns to PreBind; the assumption
// made for it must hold its devices on, not be taken for a replaced
// claim's.
func TestCreatedClaimBeforeCreateReturns(t *testing.T) {
	c := newCluster(t, nil, extendedObjects(t)...)
	placeholder := gpuClaim("pod-a-extended-resources-abcde", 1)
	placeholder.UID = "placeholder"
	assumed := placeholder.DeepCopy()
	assumed.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: driver, Pool: "node-1", Device: "gpu-0"}}}}
	at.Must(t, c.pl.feed.assumeNew(placeholder, assumed))
	created := placeholder.DeepCopy()
	created.UID, created.ResourceVersion = "real", "7"
	at.Must(t, c.pl.feed.setClaim(created))
	key := state.KeyOf(created)
	if a, ok := c.pl.st.Assumption(key); !ok || a.Claim.UID != "real" {
		t.Fatalf("assumption after the informer delivered the created claim: %+v (%v)", a, ok)
	}
	// PreBind's own report of the create changes nothing more.
	c.pl.feed.created(created)
	if a, ok := c.pl.st.Assumption(key); !ok || a.Claim.UID != "real" || a.Claim.Status.Allocation == nil {
		t.Fatalf("assumption after created: %+v (%v)", a, ok)
	}
	// Another claim on the same device is refused: the device stayed held.
	other := gpuClaim("b", 1)
	at.Must(t, c.pl.st.SetClaim(other))
	taken := other.DeepCopy()
	taken.Status.Allocation = assumed.Status.Allocation
	if err := c.pl.st.Assume(taken); err == nil {
		t.Error("gpu-0 was handed out twice")
	}
}
