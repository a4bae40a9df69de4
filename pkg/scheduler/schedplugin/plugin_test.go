package schedplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
)

// gpuObjects are the API objects of gpuNode on node-1, a node without
// devices (node-2) and the class "gpu".
func gpuObjects(t *testing.T) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	for _, s := range []*api.ResourceSlice{
		at.Slice("node-1-counters").Driver(driver).Pool("node-1").Node("node-1").Count(2).
			Counters("gpu-0-counters", "memory", "40Gi").Obj(),
		at.Slice("node-1-devices").Driver(driver).Pool("node-1").Node("node-1").Count(2).Device(
			at.Device("gpu-0").Consumes("gpu-0-counters", "memory", "40Gi"),
			at.Device("gpu-0-part-0").Consumes("gpu-0-counters", "memory", "20Gi"),
			at.Device("gpu-0-part-1").Consumes("gpu-0-counters", "memory", "20Gi")).Obj(),
	} {
		v, err := api.ToUpstream(s)
		at.Must(t, err)
		v.UID = types.UID("uid-" + v.Name)
		out = append(out, v)
	}
	return append(out, at.Class("gpu", `device.driver == "`+driver+`"`))
}

// gpuPod is a pod named name whose claim "gpu" is the ResourceClaim claim.
func gpuPod(name, claim string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{SchedulerName: profile,
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}},
	}
}

// stockPod is a pod of another scheduling profile (whose DRA plugin is
// the in-tree one) using claim.
func stockPod(name, claim string) *v1.Pod {
	p := gpuPod(name, claim)
	p.Spec.SchedulerName = v1.DefaultSchedulerName
	return p
}

func gpuClaim(name string, count int64) *resourcev1.ResourceClaim {
	c := at.Claim(name).Request(at.Request("gpu", "gpu").Count(count)).Obj()
	c.ResourceVersion = "1"
	return c
}

var (
	node1 = fakeNodeInfo{node: at.Node("node-1")}
	node2 = fakeNodeInfo{node: at.Node("node-2")}
)

// schedule runs a scheduling cycle for pod over nodes the way the
// framework does, up to Reserve on the first node that fits. It returns
// the cycle state and the node (empty when none fits, then with the
// statuses of every node).
func schedule(t *testing.T, c *cluster, pod *v1.Pod, nodes ...fwk.NodeInfo) (*fakeCycleState, string, []*fwk.Status) {
	t.Helper()
	ctx := context.Background()
	cs := newCycleState()
	if _, st := c.pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
		return cs, "", []*fwk.Status{st}
	}
	var statuses []*fwk.Status
	for _, n := range nodes {
		st := c.pl.Filter(ctx, cs, pod, n)
		if st.IsSuccess() {
			name := n.Node().Name
			if st := c.pl.Reserve(ctx, cs, pod, name); !st.IsSuccess() {
				t.Fatalf("Reserve on %s: %v", name, st)
			}
			return cs, name, nil
		}
		statuses = append(statuses, st)
	}
	return cs, "", statuses
}

// TestCycleResultsStartEmpty: a cycle's per-node results map may be one an
// earlier cycle released in PreBind; it must start empty, so that Reserve
// never takes another pod's allocation for a node.
func TestCycleResultsStartEmpty(t *testing.T) {
	objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1))
	c := newCluster(t, nil, objs...)
	for i, pod := range []*v1.Pod{gpuPod("pod-a", "a"), gpuPod("pod-b", "b")} {
		// pod-b's Filter on node-1 fails (gpu-0 holds every counter), so
		// only a stale entry could make its Reserve there succeed.
		cs := newCycleState()
		if _, st := c.pl.PreFilter(context.Background(), cs, pod, nil); !st.IsSuccess() {
			t.Fatalf("PreFilter %s: %v", pod.Name, st)
		}
		s, err := readState(cs)
		at.Must(t, err)
		if len(s.results) != 0 {
			t.Fatalf("cycle %d starts with results %v", i, s.results)
		}
		fits := c.pl.Filter(context.Background(), cs, pod, node1).IsSuccess()
		if fits != (i == 0) {
			t.Fatalf("Filter %s on node-1: fits %t", pod.Name, fits)
		}
		if st := c.pl.Reserve(context.Background(), cs, pod, node1.node.Name); st.IsSuccess() != fits {
			t.Fatalf("Reserve %s on node-1: %v", pod.Name, st)
		}
		if !fits {
			continue
		}
		if st := c.pl.PreBind(context.Background(), cs, pod, node1.node.Name); !st.IsSuccess() {
			t.Fatalf("PreBind %s: %v", pod.Name, st)
		}
		if s.results != nil {
			t.Errorf("cycle %d kept its results map after PreBind", i)
		}
	}
}

func TestPhasesAllocateReserveAndBind(t *testing.T) {
	objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1), gpuClaim("c", 1))
	c := newCluster(t, inline, objs...)
	ctx := context.Background()

	podA := gpuPod("pod-a", "a")
	cs, node, statuses := schedule(t, c, podA, node2, node1)
	if node != "node-1" {
		t.Fatalf("pod-a not placed: %v", statuses)
	}
	if got := c.tracker.GetPendingAllocation("uid-a"); got == nil || got.Devices.Results[0].Device != "gpu-0" {
		t.Fatalf("tracker has no allocation in flight for claim a: %v", got)
	}
	// Before PreBind the next pod already sees gpu-0 as taken: its
	// partitions consume the same counters.
	if _, node, statuses := schedule(t, c, gpuPod("pod-b", "b"), node1); node != "" {
		t.Fatalf("pod-b placed on %s while gpu-0 is reserved", node)
	} else if msg := statuses[0].Message(); !strings.Contains(msg, "claim gpu: counter memory of gpu-0-counters exhausted") {
		t.Errorf("pod-b rejected with %q, want the exhausted counter named", msg)
	}

	if st := c.pl.PreBind(ctx, cs, podA, node); !st.IsSuccess() {
		t.Fatalf("PreBind: %v", st)
	}
	got, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, "a", metav1.GetOptions{})
	at.Must(t, err)
	if !slices.Contains(got.Finalizers, resourcev1.Finalizer) {
		t.Errorf("finalizers %v, want %s", got.Finalizers, resourcev1.Finalizer)
	}
	if got.Status.Allocation == nil || got.Status.Allocation.Devices.Results[0].Device != "gpu-0" {
		t.Errorf("allocation %v, want gpu-0", got.Status.Allocation)
	}
	if len(got.Status.ReservedFor) != 1 || got.Status.ReservedFor[0].UID != podA.UID {
		t.Errorf("reservedFor %v, want pod-a", got.Status.ReservedFor)
	}
	if c.tracker.GetPendingAllocation("uid-a") != nil {
		t.Error("allocation still in flight after PreBind")
	}
	// The assumption holds until the informer shows the allocation, and
	// is not dropped while the tracker has the written claim.
	if _, node, _ := schedule(t, c, gpuPod("pod-c", "c"), node1); node != "" {
		t.Fatalf("pod-c placed on %s after claim a was bound", node)
	}
}

// TestDeviceTaintRulesApply: a DeviceTaintRule's NoSchedule taint keeps
// the device from claims that do not tolerate it: the plugin feeds the
// rules from the scheduler's informer to its State, which applies them.
func TestDeviceTaintRulesApply(t *testing.T) {
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-0-broken"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To("node-1"), Device: ptr.To("gpu-0")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
	objs := append(gpuObjects(t), gpuClaim("a", 1), rule)
	c := newCluster(t, nil, objs...)
	cs, node, statuses := schedule(t, c, gpuPod("pod-a", "a"), node1)
	if node != "node-1" {
		t.Fatalf("pod-a not placed: %v", statuses)
	}
	s, err := readState(cs)
	at.Must(t, err)
	if got := s.allocations[0].Devices.Results[0].Device; got != "gpu-0-part-0" {
		t.Errorf("allocated %s, want gpu-0-part-0 (gpu-0 is tainted NoSchedule)", got)
	}
}

func TestUnreserveFreesDevices(t *testing.T) {
	objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1))
	c := newCluster(t, nil, objs...)
	ctx := context.Background()
	podA := gpuPod("pod-a", "a")
	// Binding fails: the claim is being deleted when PreBind looks.
	c.client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(resourcev1.Resource("resourceclaims"), "a", errors.New("claim is being deleted"))
	})
	cs, node, _ := schedule(t, c, podA, node1)
	if node != "node-1" {
		t.Fatal("pod-a not placed")
	}
	st := c.pl.PreBind(ctx, cs, podA, node)
	if st.IsSuccess() || !strings.Contains(st.Message(), "claim is being deleted") {
		t.Fatalf("PreBind: %v, want the API's error", st)
	}
	c.pl.Unreserve(ctx, cs, podA, node)
	if c.tracker.GetPendingAllocation("uid-a") != nil {
		t.Error("allocation still in flight after Unreserve")
	}
	if _, node, statuses := schedule(t, c, gpuPod("pod-b", "b"), node1); node != "node-1" {
		t.Fatalf("pod-b not placed after pod-a's binding failed: %v", statuses)
	}
}

// TestReserveAgainAfterUnreserve: in a pod group's cycle kube-scheduler
// calls Reserve, Unreserve and Reserve again on one cycle state; the
// second Reserve finds the node's results and assumes them again.
func TestReserveAgainAfterUnreserve(t *testing.T) {
	c := newCluster(t, nil, append(gpuObjects(t), gpuClaim("a", 1))...)
	ctx := context.Background()
	podA := gpuPod("pod-a", "a")
	cs, node, _ := schedule(t, c, podA, node1)
	if node != "node-1" {
		t.Fatal("pod-a not placed")
	}
	c.pl.Unreserve(ctx, cs, podA, node)
	if c.tracker.GetPendingAllocation("uid-a") != nil {
		t.Fatal("allocation still in flight after Unreserve")
	}
	if st := c.pl.Reserve(ctx, cs, podA, node); !st.IsSuccess() {
		t.Fatalf("Reserve after Unreserve: %v", st)
	}
	if got := c.tracker.GetPendingAllocation("uid-a"); got == nil || got.Devices.Results[0].Device != "gpu-0" {
		t.Fatalf("no allocation in flight after the second Reserve: %v", got)
	}
	if st := c.pl.PreBind(ctx, cs, podA, node); !st.IsSuccess() {
		t.Fatalf("PreBind: %v", st)
	}
	got, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, "a", metav1.GetOptions{})
	at.Must(t, err)
	if got.Status.Allocation == nil || got.Status.Allocation.Devices.Results[0].Device != "gpu-0" {
		t.Errorf("claim written with %v", got.Status.Allocation)
	}
}

func TestPreBindRetriesConflicts(t *testing.T) {
	objs := append(gpuObjects(t), gpuClaim("a", 1))
	c := newCluster(t, nil, objs...)
	conflicts := 0
	c.client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(resourcev1.Resource("resourceclaims"), "a", errors.New("stale"))
		}
		return false, nil, nil
	})
	podA := gpuPod("pod-a", "a")
	cs, node, _ := schedule(t, c, podA, node1)
	if st := c.pl.PreBind(context.Background(), cs, podA, node); !st.IsSuccess() {
		t.Fatalf("PreBind: %v", st)
	}
	got, err := c.client.ResourceV1().ResourceClaims("default").Get(context.Background(), "a", metav1.GetOptions{})
	at.Must(t, err)
	if conflicts != 1 || got.Status.Allocation == nil || len(got.Status.ReservedFor) != 1 {
		t.Errorf("after %d conflicts: allocation %v, reservedFor %v", conflicts, got.Status.Allocation, got.Status.ReservedFor)
	}
}

func TestForeignAllocationInFlight(t *testing.T) {
	objs := append(gpuObjects(t), gpuClaim("stock", 1), gpuClaim("mine", 1), stockPod("pod-stock", "stock"))
	c := newCluster(t, nil, objs...)
	// Another plugin (the in-tree one, in another profile) reserved gpu-0
	// for claim "stock" and has not written it yet.
	stock := gpuClaim("stock", 1)
	stock.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{at.Result("gpu", driver, "node-1", "gpu-0")}}}
	at.Must(t, c.tracker.SignalClaimPendingAllocation(stock.UID, stock))
	if _, node, _ := schedule(t, c, gpuPod("pod-mine", "mine"), node1); node != "" {
		t.Fatalf("placed on %s although gpu-0 is in flight for another plugin", node)
	}
	// Its binding failed: the allocation is no longer in flight and never
	// reached the API, so the devices are free again.
	c.tracker.MaybeRemoveClaimPendingAllocation(stock.UID, true)
	if _, node, statuses := schedule(t, c, gpuPod("pod-mine", "mine"), node1); node != "node-1" {
		t.Fatalf("not placed after the other plugin's binding failed: %v", statuses)
	}
}

// TestPostFilter: with no claim to deallocate, the pod's condition reads
// as under the in-tree plugin ("cannot allocate all claims" per node,
// nothing from PostFilter) and dractl's account of each claim goes to an
// Event; with the inline form the account is the condition's message.
func TestPostFilter(t *testing.T) {
	const account = "claim gpu: enough devices one by one, but no combination satisfies the constraints and shared counters on 1 node; no devices on 1 node"
	for _, tc := range []struct {
		name      string
		args      *Args
		reason    string // every node's Filter reason
		message   string // PostFilter's
		eventNote string // "" for no Event
	}{
		{"in-tree words", nil, reasonCannotAllocate, "", account},
		{"inline", inline, "", "dractl: " + account, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append(gpuObjects(t), gpuClaim("big", 3))
			var args runtime.Object
			if tc.args != nil {
				args = tc.args
			}
			c := newCluster(t, args, objs...)
			pod := gpuPod("pod", "big")
			cs, node, statuses := schedule(t, c, pod, node1, node2)
			if node != "" {
				t.Fatalf("placed on %s", node)
			}
			for _, st := range statuses {
				if st.Code() != fwk.UnschedulableAndUnresolvable {
					t.Errorf("status %v, want UnschedulableAndUnresolvable", st)
				}
				if tc.reason != "" && st.Message() != tc.reason {
					t.Errorf("Filter reason %q, want %q", st.Message(), tc.reason)
				}
			}
			_, st := c.pl.PostFilter(context.Background(), cs, pod, nil)
			if st.Code() != fwk.Unschedulable || st.Message() != tc.message {
				t.Errorf("PostFilter: %v\nwant message %q", st, tc.message)
			}
			select {
			case e := <-c.handle.recorder.Events:
				if want := "Warning " + eventReason + " " + tc.eventNote; tc.eventNote == "" || e != want {
					t.Errorf("event %q, want %q", e, want)
				}
			default:
				if tc.eventNote != "" {
					t.Errorf("no %s event", eventReason)
				}
			}
		})
	}
}

func TestTruncateNote(t *testing.T) {
	long := strings.Repeat("é", maxNote) // two bytes each
	got := truncateNote(long)
	if len(got) > maxNote || !strings.HasSuffix(got, " ...") || !utf8.ValidString(got) {
		t.Errorf("truncateNote: %d bytes, valid UTF-8 %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-4:])
	}
	if truncateNote("short") != "short" {
		t.Error("a short note was changed")
	}
}

func TestPostFilterDeallocatesUnusableClaim(t *testing.T) {
	// Allocated on node-1 for nobody; the pod is limited to node-2 by
	// another plugin, so dractl sees only node-2.
	stale := gpuClaim("stale", 1)
	stale.Status.Allocation = &resourcev1.AllocationResult{
		Devices:      resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{at.Result("gpu", driver, "node-1", "gpu-0")}},
		NodeSelector: at.Selector("kubernetes.io/hostname", "node-1"),
	}
	c := newCluster(t, inline, append(gpuObjects(t), stale)...)
	pod := gpuPod("pod", "stale")
	n2 := fakeNodeInfo{node: at.Node("node-2", "kubernetes.io/hostname", "node-2")}
	cs, node, statuses := schedule(t, c, pod, n2)
	if node != "" {
		t.Fatalf("placed on %s", node)
	}
	if msg := statuses[0].Message(); msg != "claim gpu: "+whyElsewhere {
		t.Errorf("Filter: %q", msg)
	}
	_, st := c.pl.PostFilter(context.Background(), cs, pod, nil)
	if st.Message() != "deallocation of ResourceClaim completed" {
		t.Fatalf("PostFilter: %v", st)
	}
	got, err := c.client.ResourceV1().ResourceClaims("default").Get(context.Background(), "stale", metav1.GetOptions{})
	at.Must(t, err)
	if got.Status.Allocation != nil {
		t.Errorf("allocation %v, want none", got.Status.Allocation)
	}
}

func TestPreFilterRejects(t *testing.T) {
	noClass := at.Claim("no-class").Request(at.Request("gpu", "tpu")).Obj()
	deleting := gpuClaim("deleting", 1)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	notMine := gpuClaim("pod-gpu", 1) // the name a template would give, but no owner
	c := newCluster(t, nil, append(gpuObjects(t), noClass, deleting, notMine)...)

	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"missing", gpuPod("pod", "missing"), `"missing" not found`},
		{"class", gpuPod("pod", "no-class"), "request gpu: device class tpu does not exist"},
		{"deleting", gpuPod("pod", "deleting"), `resourceclaim "deleting" is being deleted`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, st := c.pl.PreFilter(context.Background(), newCycleState(), tc.pod, nil)
			if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), tc.want) {
				t.Errorf("PreFilter: %v, want UnschedulableAndUnresolvable with %q", st, tc.want)
			}
		})
	}
	templated := gpuPod("pod", "")
	templated.Spec.ResourceClaims[0] = v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")}
	templated.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("pod-gpu")}}
	if st := c.pl.PreEnqueue(context.Background(), templated); st.IsSuccess() || !strings.Contains(st.Message(), "was not created for Pod") {
		t.Errorf("PreEnqueue with another pod's generated claim: %v", st)
	}
	if st := c.pl.PreEnqueue(context.Background(), &v1.Pod{}); !st.IsSuccess() {
		t.Errorf("PreEnqueue without claims: %v", st)
	}
}

// TestPreEnqueueBeforeClaimsListed: while kube-scheduler starts, a claim
// missing from the tracker may just not have been listed yet, so the pod
// is let in (PreFilter looks again once the caches are synced); once the
// claims are listed, a missing claim keeps the pod out.
func TestPreEnqueueBeforeClaimsListed(t *testing.T) {
	c := newUnstartedCluster(t, nil, gpuObjects(t)...)
	pod := gpuPod("pod", "missing")
	if st := c.pl.PreEnqueue(context.Background(), pod); !st.IsSuccess() {
		t.Errorf("PreEnqueue before the claims are listed: %v, want success", st)
	}
	c.start()
	if st := c.pl.PreEnqueue(context.Background(), pod); st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), `"missing" not found`) {
		t.Errorf("PreEnqueue after the claims are listed: %v, want UnschedulableAndUnresolvable for the missing claim", st)
	}
	if _, st := c.pl.PreFilter(context.Background(), newCycleState(), pod, nil); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("PreFilter: %v, want UnschedulableAndUnresolvable", st)
	}
}

// TestSignPod: pods without claims may be batched by kube-scheduler, pods
// with claims may not.
func TestSignPod(t *testing.T) {
	pl := &Plugin{}
	if fr, st := pl.SignPod(context.Background(), &v1.Pod{}); !st.IsSuccess() || len(fr) != 0 {
		t.Errorf("pod without claims: %v %v, want success and no fragments", fr, st)
	}
	if _, st := pl.SignPod(context.Background(), gpuPod("pod-a", "a")); st.Code() != fwk.Unschedulable {
		t.Errorf("pod with a claim: %v, want Unschedulable", st)
	}
}

// TestWriteOfUnknownOutcomeKeepsDevices: when the API server does not say
// whether it stored PreBind's allocation (etcd timed out), the write may
// still be committed, so the devices stay held after Unreserve until the
// claim shows what was stored, or the hold runs out.
func TestWriteOfUnknownOutcomeKeepsDevices(t *testing.T) {
	for _, tc := range []struct {
		name string
		// then is what happens after the failed binding: claim a as the
		// informer delivers it (nil: nothing) and how much time passes.
		stored, changed bool
		wait            time.Duration
		free            bool
	}{
		{name: "the write was stored", stored: true, free: false},
		{name: "the claim changed without it", changed: true, free: true},
		{name: "nothing heard, hold not over", wait: uncertainHold - time.Second, free: false},
		{name: "nothing heard, hold over", wait: uncertainHold + time.Second, free: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1))
			c := newCluster(t, nil, objs...)
			ctx := context.Background()
			// The informer's goroutine reads the clock too.
			clk := testingclock.NewFakeClock(time.Now())
			c.pl.feed.now = clk.Now
			c.client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "status" {
					return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
				}
				return false, nil, nil
			})
			podA := gpuPod("pod-a", "a")
			cs, node, _ := schedule(t, c, podA, node1)
			if node != "node-1" {
				t.Fatal("pod-a not placed")
			}
			if st := c.pl.PreBind(ctx, cs, podA, node); st.IsSuccess() || !strings.Contains(st.Message(), "request timed out") {
				t.Fatalf("PreBind: %v, want the API's error", st)
			}
			c.pl.Unreserve(ctx, cs, podA, node)
			// The scheduler's other DRA plugins (another profile's) see
			// devices in use through the tracker alone.
			if c.tracker.GetPendingAllocation("uid-a") == nil {
				t.Fatal("the allocation left the claim tracker's flight while its write's outcome is unknown")
			}
			if _, node, _ := schedule(t, c, gpuPod("pod-b", "b"), node1); node != "" {
				t.Fatalf("pod-b placed on %s right after a write of unknown outcome", node)
			}
			s, err := readState(cs)
			at.Must(t, err)
			if tc.stored || tc.changed {
				a := gpuClaim("a", 1)
				a.ResourceVersion = "2"
				if tc.stored {
					a.Finalizers = []string{resourcev1.Finalizer}
					a.Status.Allocation = s.allocations[0]
					a.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: podA.Name, UID: podA.UID}}
				} else {
					a.Labels = map[string]string{"touched": "yes"}
				}
				c.tracker.set(a)
				c.pl.feed.setClaim(a)
			}
			clk.Step(tc.wait)
			if !tc.free && !tc.stored {
				// Allocating claim a again could give it other devices
				// while the earlier write still lands.
				if _, node, statuses := schedule(t, c, podA, node1); node != "" || statuses[0].Code() != fwk.Error {
					t.Fatalf("pod-a tried again while its write's outcome is unknown: node %q, %v", node, statuses)
				}
			}
			_, node, statuses := schedule(t, c, gpuPod("pod-b", "b"), node1)
			if got := node == "node-1"; got != tc.free {
				t.Fatalf("pod-b placed: %v, want %v (%v)", got, tc.free, statuses)
			}
			// Once the outcome is known the tracker holds it as the
			// informer shows it, no longer in flight.
			if got, want := c.tracker.GetPendingAllocation("uid-a") != nil, !tc.free && !tc.stored; got != want {
				t.Errorf("claim a in the tracker's flight at the end: %v, want %v", got, want)
			}
		})
	}
}

func TestWriteMayHaveLanded(t *testing.T) {
	gr := resourcev1.Resource("resourceclaims")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true},
		{apierrors.NewTimeoutError("request did not complete within 1m0s", 0), true},
		{apierrors.NewServerTimeout(gr, "update", 0), true},
		{errors.New("http2: client connection lost"), true},
		{context.DeadlineExceeded, true},
		{apierrors.NewConflict(gr, "a", errors.New("stale")), false},
		{apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceClaim"}, "a", nil), false},
		{apierrors.NewForbidden(gr, "a", errors.New("no")), false},
		{apierrors.NewNotFound(gr, "a"), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
	} {
		if got := writeMayHaveLanded(fmt.Errorf("reserve claim: %w", tc.err)); got != tc.want {
			t.Errorf("writeMayHaveLanded(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestForeignAllocationWrittenBeforeInformer: another plugin's binding
// ended (its allocation is no longer in flight but written, in the
// tracker's assume cache) before the informer delivered the written claim
// to the State: the devices are taken all the same.
func TestForeignAllocationWrittenBeforeInformer(t *testing.T) {
	objs := append(gpuObjects(t), gpuClaim("stock", 1), gpuClaim("mine", 1), stockPod("pod-stock", "stock"))
	c := newCluster(t, nil, objs...)
	stock := gpuClaim("stock", 1)
	stock.ResourceVersion = "2"
	stock.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{at.Result("gpu", driver, "node-1", "gpu-0")}}}
	c.tracker.set(stock)
	if _, node, _ := schedule(t, c, gpuPod("pod-mine", "mine"), node1); node != "" {
		t.Fatalf("placed on %s although gpu-0 is written for another plugin's claim", node)
	}
	// The informer catches up: the observed allocation replaces the
	// assumed one, and the devices stay taken.
	c.pl.feed.setClaim(stock)
	if _, node, _ := schedule(t, c, gpuPod("pod-mine", "mine"), node1); node != "" {
		t.Fatalf("placed on %s after the informer delivered the written claim", node)
	}
}

// TestCycleLooksOnlyAtForeignClaims: a cycle looks up in the claim
// tracker the pod's own claims and the pending claims of other profiles'
// pods, not every pending claim: the first cycles of a scheduler that
// starts with many pending pods would otherwise cost the square of their
// number.
func TestCycleLooksOnlyAtForeignClaims(t *testing.T) {
	objs := gpuObjects(t)
	for i := range 50 {
		objs = append(objs, gpuClaim(fmt.Sprintf("claim-%d", i), 1))
	}
	objs = append(objs, gpuClaim("stock", 1), stockPod("pod-stock", "stock"))
	c := newCluster(t, nil, objs...)
	// The informer delivered every claim to the State.
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(c.pl.st.Snapshot().Claims()) == 51, nil
	})
	at.Must(t, err)
	c.tracker.mu.Lock()
	c.tracker.lookups = 0
	c.tracker.mu.Unlock()
	if _, st := c.pl.PreFilter(context.Background(), newCycleState(), gpuPod("pod-0", "claim-0"), nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	c.tracker.mu.Lock()
	defer c.tracker.mu.Unlock()
	// claim-0: Get and GetPendingAllocation; stock: both again.
	if c.tracker.lookups > 4 {
		t.Errorf("%d claim tracker lookups in one cycle, want at most 4", c.tracker.lookups)
	}
}

// TestUnreserveAfterPreBindKeepsReservation: once PreBind has written
// the claims the pod's binding may be stored even if it is reported to
// have failed, and a bound pod needs its claims reserved for it. Before
// that, Unreserve takes the pod out of reservedFor.
func TestUnreserveAfterPreBindKeepsReservation(t *testing.T) {
	for _, preBound := range []bool{true, false} {
		t.Run(fmt.Sprintf("PreBind succeeded=%v", preBound), func(t *testing.T) {
			objs := append(gpuObjects(t), gpuClaim("a", 1))
			c := newCluster(t, nil, objs...)
			ctx := context.Background()
			podA := gpuPod("pod-a", "a")
			cs, node, _ := schedule(t, c, podA, node1)
			if st := c.pl.PreBind(ctx, cs, podA, node); !st.IsSuccess() {
				t.Fatalf("PreBind: %v", st)
			}
			s, err := readState(cs)
			at.Must(t, err)
			// A failure in the binding cycle before PreBind ended.
			s.preBound = preBound
			c.pl.Unreserve(ctx, cs, podA, node)
			got, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, "a", metav1.GetOptions{})
			at.Must(t, err)
			if reserved := len(got.Status.ReservedFor) == 1; reserved != preBound {
				t.Errorf("claim reserved for the pod after Unreserve: %v, want %v", reserved, preBound)
			}
			if got.Status.Allocation == nil {
				t.Error("written allocation gone after Unreserve")
			}
		})
	}
}

// templatedPod is pod-t, whose claim comes from a template, and the claim
// the resourceclaim controller generated for it.
func templatedPod() (*v1.Pod, *resourcev1.ResourceClaim) {
	pod := gpuPod("pod-t", "unused")
	pod.Spec.ResourceClaims[0] = v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")}
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("pod-t-gpu-x1")}}
	claim := gpuClaim("pod-t-gpu-x1", 1)
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	return pod, claim
}

// TestQueueingHints: claim and slice events requeue only the pods they may
// help. A pod whose claims are not all there waits for them: slice events
// pass it by, and a claim event only brings it back when it is one of the
// pod's claims (by name, or generated for it from a template).
func TestQueueingHints(t *testing.T) {
	withTemplate, generated := templatedPod()
	forOther := gpuClaim("pod-u-gpu-x2", 1)
	forOther.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pod-u", UID: "uid-pod-u", Controller: ptr.To(true)}}
	objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1), generated, forOther)
	c := newCluster(t, nil, objs...)
	logger := klog.Background()
	allocated := gpuClaim("b", 1)
	allocated.ResourceVersion = "2"
	allocated.Status.Allocation = &resourcev1.AllocationResult{}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 1}}
	relabelled := slice.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	for _, tc := range []struct {
		name     string
		hint     func(klog.Logger, *v1.Pod, any, any) (fwk.QueueingHint, error)
		pod      *v1.Pod
		old, cur any
		want     fwk.QueueingHint
	}{
		{"the pod's claim appears", c.pl.claims.afterClaimChange, gpuPod("p", "a"), nil, gpuClaim("a", 1), fwk.Queue},
		{"another claim appears", c.pl.claims.afterClaimChange, gpuPod("p", "a"), nil, gpuClaim("other", 1), fwk.QueueSkip},
		{"another claim is deallocated", c.pl.claims.afterClaimChange, gpuPod("p", "a"), allocated, gpuClaim("b", 1), fwk.Queue},
		{"the claim generated for the pod appears", c.pl.claims.afterClaimChange, withTemplate, nil, generated, fwk.Queue},
		{"a claim generated for another pod appears", c.pl.claims.afterClaimChange, withTemplate, nil, forOther, fwk.QueueSkip},
		{"a slice appears, the pod's claims are there", c.pl.claims.afterSliceChange, gpuPod("p", "a"), nil, slice, fwk.Queue},
		{"a slice appears, the pod's claim is not there", c.pl.claims.afterSliceChange, gpuPod("p", "missing"), nil, slice, fwk.QueueSkip},
		{"a slice's labels change", c.pl.claims.afterSliceChange, gpuPod("p", "a"), slice, relabelled, fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.hint(logger, tc.pod, tc.old, tc.cur)
			at.Must(t, err)
			if got != tc.want {
				t.Errorf("hint %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreQueueingHintNarrowsClaimEvents: with kube-scheduler's
// SchedulerPreQueueingHints feature, a claim event is put to the pods
// podsOfClaim names (or to all). Every pod the claim hint would requeue
// must be among them, and a claim no pod references names none.
func TestPreQueueingHintNarrowsClaimEvents(t *testing.T) {
	withTemplate, generated := templatedPod()
	pods := []*v1.Pod{gpuPod("pod-a", "a"), gpuPod("pod-a2", "a"), gpuPod("pod-b", "b"), withTemplate, gpuPod("pod-m", "missing")}
	objs := append(gpuObjects(t), gpuClaim("a", 1), gpuClaim("b", 1), generated)
	for _, p := range pods {
		objs = append(objs, p)
	}
	c := newCluster(t, nil, objs...)
	allocatedB := allocatedClaim("b")
	allocatedB.ResourceVersion = "2"
	changedA := gpuClaim("a", 1)
	changedA.ResourceVersion = "2"
	changedA.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "x", UID: "x"}}
	const all = "all"
	for _, tc := range []struct {
		name     string
		old, cur any
		want     []string // pod names, or all
	}{
		{"a named claim appears", nil, gpuClaim("a", 1), []string{"pod-a", "pod-a2"}},
		{"a named claim's status changes", gpuClaim("a", 1), changedA, []string{"pod-a", "pod-a2"}},
		{"a generated claim appears", nil, generated, []string{"pod-t"}},
		{"a claim no pod references appears", nil, gpuClaim("other", 1), nil},
		{"a claim is allocated", gpuClaim("b", 1), allocatedB, []string{"pod-b"}},
		{"a claim is deallocated", allocatedB, gpuClaim("b", 1), []string{all}},
		{"an allocated claim is deleted", allocatedB, nil, []string{all}},
		{"an unallocated claim is deleted", gpuClaim("a", 1), nil, nil},
		{"a claim is deleted in an unknown state", cache.DeletedFinalStateUnknown{Key: "default/b", Obj: allocatedB}, nil, []string{all}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.pl.claims.podsOfClaim(klog.Background(), tc.old, tc.cur)
			at.Must(t, err)
			var got []string
			if res.AllPods {
				got = []string{all}
			}
			for _, nn := range res.Pods {
				got = append(got, nn.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("narrowed to %v, want %v", got, tc.want)
			}
			for _, p := range pods {
				hint, err := c.pl.claims.afterClaimChange(klog.Background(), p, tc.old, tc.cur)
				at.Must(t, err)
				if hint == fwk.Queue && !res.AllPods && !slices.Contains(got, p.Name) {
					t.Errorf("the claim hint requeues %s, which the narrowing leaves out", p.Name)
				}
			}
		})
	}
}
