package schedplugin

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	at "github.com/dractl/dractl/pkg/core/coretest"
)

// podGroup is the PodGroup "pg" whose claim "gpu" is the ResourceClaim
// claim, or, with a template, the claim generated for the group as claim.
func podGroup(claim string, template bool) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "default", UID: "uid-pg"}}
	if template {
		pg.Spec.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")}}
		pg.Status.ResourceClaimStatuses = []schedulingv1beta1.PodGroupResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	} else {
		pg.Spec.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	}
	return pg
}

// groupClaim is the claim of podGroup: controlled by the group when
// generated from its template.
func groupClaim(name string, template bool) *resourcev1.ResourceClaim {
	c := gpuClaim(name, 1)
	if template {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "pg", UID: "uid-pg", Controller: ptr.To(true)}}
	}
	return c
}

// groupPod is a pod of PodGroup "pg" whose claim "gpu" is the group's
// (see podGroup).
func groupPod(name, claim string, template bool) *v1.Pod {
	p := gpuPod(name, claim)
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("pg")}
	if template {
		p.Spec.ResourceClaims[0] = v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")}
		p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	}
	return p
}

var groupConsumer = resourcev1.ResourceClaimConsumerReference{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "pg", UID: "uid-pg"}

// inGroupCycle runs the pod from PreFilter to Reserve on node as a member
// of the pod group cycle group, on a cycle state of its own.
func inGroupCycle(t *testing.T, c *cluster, group *fakeGroupCycle, pod *v1.Pod, node fakeNodeInfo) *fakeCycleState {
	t.Helper()
	ctx := context.Background()
	cs := newCycleState()
	cs.group = group
	if _, st := c.pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter %s: %v", pod.Name, st)
	}
	if st := c.pl.Filter(ctx, cs, pod, node); !st.IsSuccess() {
		t.Fatalf("Filter %s: %v", pod.Name, st)
	}
	if st := c.pl.Reserve(ctx, cs, pod, node.node.Name); !st.IsSuccess() {
		t.Fatalf("Reserve %s: %v", pod.Name, st)
	}
	return cs
}

// statusWrites counts the writes of claims' status.
func statusWrites(c *cluster) int {
	n := 0
	for _, a := range c.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == "resourceclaims" {
			n++
		}
	}
	return n
}

// TestPodGroupCycleSharesClaim: the pods of one PodGroup share its claim in
// one pod group cycle, as kube-scheduler runs it: each member up to
// Reserve while the claim's allocation, made for the first, is in flight;
// all of them unreserved, last first; each reserved again for binding,
// without the group's state, and bound. The claim is allocated once,
// written once, and reserved for the PodGroup, not for each pod.
func TestPodGroupCycleSharesClaim(t *testing.T) {
	for _, template := range []bool{false, true} {
		name := "named claim"
		if template {
			name = "claim from the group's template"
		}
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, nil, append(gpuObjects(t), groupClaim("shared", template), gpuClaim("b", 1))...)
			c.handle.groups.groups["default/pg"] = podGroup("shared", template)
			ctx := context.Background()
			pods := []*v1.Pod{groupPod("p0", "shared", template), groupPod("p1", "shared", template), groupPod("p2", "shared", template)}

			group := newGroupCycle()
			var states []*fakeCycleState
			for _, p := range pods {
				states = append(states, inGroupCycle(t, c, group, p, node1))
			}
			if got := c.tracker.sharers["uid-shared"]; got != len(pods) {
				t.Fatalf("%d pods share the allocation in flight, want %d", got, len(pods))
			}
			first := c.tracker.GetPendingAllocation("uid-shared")
			for i := len(pods) - 1; i >= 0; i-- {
				c.pl.Unreserve(ctx, states[i], pods[i], node1.node.Name)
				if inFlight := c.tracker.GetPendingAllocation("uid-shared") != nil; inFlight != (i > 0) {
					t.Fatalf("after unreserving %s the allocation is in flight: %v, want %v", pods[i].Name, inFlight, i > 0)
				}
			}

			// Binding: reserved again in order, bound in another.
			for i, p := range pods {
				states[i].group = nil
				if st := c.pl.Reserve(ctx, states[i], p, node1.node.Name); !st.IsSuccess() {
					t.Fatalf("Reserve %s for binding: %v", p.Name, st)
				}
			}
			if got := c.tracker.GetPendingAllocation("uid-shared"); !apiequality.Semantic.DeepEqual(got, first) {
				t.Fatalf("allocation in flight for binding %v, want the group cycle's %v", got, first)
			}
			for _, i := range []int{2, 0, 1} {
				if st := c.pl.PreBind(ctx, states[i], pods[i], node1.node.Name); !st.IsSuccess() {
					t.Fatalf("PreBind %s: %v", pods[i].Name, st)
				}
			}
			got, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, "shared", metav1.GetOptions{})
			at.Must(t, err)
			if got.Status.Allocation == nil || !sameDevices(got.Status.Allocation, first) {
				t.Errorf("allocation %v, want %v", got.Status.Allocation, first)
			}
			if want := []resourcev1.ResourceClaimConsumerReference{groupConsumer}; !apiequality.Semantic.DeepEqual(got.Status.ReservedFor, want) {
				t.Errorf("reservedFor %v, want %v", got.Status.ReservedFor, want)
			}
			if n := statusWrites(c); n != 1 {
				t.Errorf("%d writes of the claim's status, want 1", n)
			}
			if c.tracker.GetPendingAllocation("uid-shared") != nil {
				t.Error("allocation still in flight after PreBind")
			}
			// The group's devices stay taken.
			if _, node, _ := schedule(t, c, gpuPod("pod-b", "b"), node1); node != "" {
				t.Errorf("pod-b placed on %s, on the group's devices", node)
			}
		})
	}
}

// TestGroupMembersWriteClaimInTurn: kube-scheduler binds the members of
// a pod group concurrently. While the first member's write of the group's
// claim is in flight, the second waits for it instead of writing the same
// allocation too; then it finds the claim written and writes nothing.
func TestGroupMembersWriteClaimInTurn(t *testing.T) {
	c := newCluster(t, nil, append(gpuObjects(t), groupClaim("shared", true))...)
	c.handle.groups.groups["default/pg"] = podGroup("shared", true)
	ctx := context.Background()
	pods := []*v1.Pod{groupPod("p0", "shared", true), groupPod("p1", "shared", true)}
	group := newGroupCycle()
	var states []*fakeCycleState
	for _, p := range pods {
		states = append(states, inGroupCycle(t, c, group, p, node1))
	}
	writing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			once.Do(func() { close(writing) })
			<-release
		}
		return false, nil, nil
	})
	bind := func(i int) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if st := c.pl.PreBind(ctx, states[i], pods[i], node1.node.Name); !st.IsSuccess() {
				t.Errorf("PreBind %s: %v", pods[i].Name, st)
			}
		}()
		return done
	}
	first := bind(0)
	<-writing
	second := bind(1)
	// The second member waits for the claim's turn.
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return c.pl.binder.writing.Users("uid-shared") == 2, nil
	})
	at.Must(t, err)
	if returned(second) {
		t.Fatal("the second member's PreBind ended while the first's write was in flight")
	}
	close(release)
	<-first
	<-second
	claimWrites := 0
	for _, a := range c.client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "resourceclaims" {
			claimWrites++
		}
	}
	// The finalizer, then the allocation with the reservation.
	if claimWrites != 2 {
		t.Errorf("%d writes of the claim, want 2 (the first member's)", claimWrites)
	}
	got, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, "shared", metav1.GetOptions{})
	at.Must(t, err)
	if want := []resourcev1.ResourceClaimConsumerReference{groupConsumer}; got.Status.Allocation == nil || !apiequality.Semantic.DeepEqual(got.Status.ReservedFor, want) {
		t.Errorf("claim allocated %v, reserved for %v, want allocated and reserved for %v", got.Status.Allocation != nil, got.Status.ReservedFor, want)
	}
	if n := c.pl.binder.writing.Users("uid-shared"); n != 0 {
		t.Errorf("%d still hold or wait for the claim's turn", n)
	}
}

// TestInFlightClaimOutsideGroupCycle: only members of the pod group cycle
// that put a claim's allocation in flight may use it before it is
// written; a pod of another cycle (even of the same group) waits, with
// the in-tree plugin's words.
func TestInFlightClaimOutsideGroupCycle(t *testing.T) {
	c := newCluster(t, nil, append(gpuObjects(t), groupClaim("shared", false))...)
	c.handle.groups.groups["default/pg"] = podGroup("shared", false)
	inGroupCycle(t, c, newGroupCycle(), groupPod("p0", "shared", false), node1)
	for name, group := range map[string]*fakeGroupCycle{"no group cycle": nil, "another group cycle": newGroupCycle()} {
		t.Run(name, func(t *testing.T) {
			cs := newCycleState()
			if group != nil {
				cs.group = group
			}
			_, st := c.pl.PreFilter(context.Background(), cs, groupPod("p1", "shared", false), nil)
			if want := "resource claim default/shared is in the process of being allocated"; st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != want {
				t.Errorf("PreFilter: %v, want %q", st, want)
			}
		})
	}
}

// TestGroupPodOwnClaimReservedForPod: a claim of a grouped pod that its
// PodGroup does not list is the pod's, and reserved for the pod.
func TestGroupPodOwnClaimReservedForPod(t *testing.T) {
	c := newCluster(t, nil, append(gpuObjects(t), gpuClaim("own", 1))...)
	c.handle.groups.groups["default/pg"] = podGroup("shared", false)
	pod := groupPod("p0", "own", false)
	cs, node, statuses := schedule(t, c, pod, node1)
	if node == "" {
		t.Fatalf("not placed: %v", statuses)
	}
	if st := c.pl.PreBind(context.Background(), cs, pod, node); !st.IsSuccess() {
		t.Fatalf("PreBind: %v", st)
	}
	got, err := c.client.ResourceV1().ResourceClaims("default").Get(context.Background(), "own", metav1.GetOptions{})
	at.Must(t, err)
	if len(got.Status.ReservedFor) != 1 || got.Status.ReservedFor[0] != podConsumer(pod) {
		t.Errorf("reservedFor %v, want the pod", got.Status.ReservedFor)
	}
}

// fakeGroupInfo is a pod group handed to PodGroupPostFilter.
type fakeGroupInfo struct {
	fwk.PodGroupInfo
	kind  fwk.EntityKeyType
	group *schedulingv1beta1.PodGroup
	pods  []*v1.Pod
}

func (g fakeGroupInfo) GetType() fwk.EntityKeyType               { return g.kind }
func (g fakeGroupInfo) GetPodGroup() *schedulingv1beta1.PodGroup { return g.group }
func (g fakeGroupInfo) GetName() string                          { return g.group.Name }
func (g fakeGroupInfo) GetNamespace() string                     { return g.group.Namespace }

// TestPodGroupPostFilter: when no placement fits the group, its claims that
// block it are freed as in-tree: a member's own allocated claim no node
// could use; else, while none of the group's pods is scheduled, a claim of
// the group no node could use, reserved for nobody or for the group alone,
// is deallocated; or the group's reservation of an allocated claim is
// taken back.
func TestPodGroupPostFilter(t *testing.T) {
	// Allocated on node-1; the members are offered node-2 only.
	allocated := func(name string, reservedFor ...resourcev1.ResourceClaimConsumerReference) *resourcev1.ResourceClaim {
		c := groupClaim(name, false)
		c.Status.Allocation = &resourcev1.AllocationResult{
			Devices:      resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{at.Result("gpu", driver, "node-1", "gpu-0")}},
			NodeSelector: at.Selector("kubernetes.io/hostname", "node-1"),
		}
		c.Status.ReservedFor = reservedFor
		return c
	}
	n1 := fakeNodeInfo{node: at.Node("node-1", "kubernetes.io/hostname", "node-1")}
	n2 := fakeNodeInfo{node: at.Node("node-2", "kubernetes.io/hostname", "node-2")}
	otherPod := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "elsewhere", UID: "uid-elsewhere"}
	for _, tc := range []struct {
		name string
		// claim is the group's claim "shared"; own, if set, p0's own claim.
		claim, own *resourcev1.ResourceClaim
		// filter: the members ran on node-2, where the claims are not
		// available; usable: on node-1, where they are (else neither).
		filter, usable bool
		// alone: p0 is the only member.
		alone     bool
		scheduled int
		kind      fwk.EntityKeyType
		message   string
		// dealloc: the claim named is deallocated; reservedFor: what
		// shared is reserved for afterwards.
		dealloc     string
		reservedFor []resourcev1.ResourceClaimConsumerReference
	}{{
		name: "member's own claim", claim: allocated("shared", groupConsumer), own: allocated("own"), filter: true, alone: true,
		message: "deallocation and deletion of ResourceClaims completed", dealloc: "own",
		reservedFor: []resourcev1.ResourceClaimConsumerReference{groupConsumer},
	}, {
		name: "group's claim reserved for the group", claim: allocated("shared", groupConsumer), filter: true,
		message: "deallocation of PodGroup ResourceClaim completed", dealloc: "shared",
	}, {
		// As any pod's claim.
		name: "group's claim reserved for nobody", claim: allocated("shared"), filter: true,
		message: "deallocation and deletion of ResourceClaims completed", dealloc: "shared",
	}, {
		name: "group's claim also reserved for another pod", claim: allocated("shared", groupConsumer, otherPod), filter: true,
		message: "ResourceClaim unreserved for PodGroup", reservedFor: []resourcev1.ResourceClaimConsumerReference{otherPod},
	}, {
		name: "group's claim usable, reservation taken back", claim: allocated("shared", groupConsumer), usable: true,
		message: "ResourceClaim unreserved for PodGroup", reservedFor: []resourcev1.ResourceClaimConsumerReference{},
	}, {
		name: "a pod of the group is scheduled", claim: allocated("shared", groupConsumer), filter: true, scheduled: 1,
		message: "deallocation and deletion of ResourceClaims completed", reservedFor: []resourcev1.ResourceClaimConsumerReference{groupConsumer},
	}, {
		name: "composite pod group", claim: allocated("shared", groupConsumer), filter: true, kind: fwk.CompositePodGroupKeyType,
		reservedFor: []resourcev1.ResourceClaimConsumerReference{groupConsumer},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append(gpuObjects(t), tc.claim)
			if tc.own != nil {
				objs = append(objs, tc.own)
			}
			c := newCluster(t, nil, objs...)
			pg := podGroup("shared", false)
			c.handle.groups.groups["default/pg"] = pg
			c.handle.groups.scheduled["default/pg"] = tc.scheduled
			ctx := context.Background()
			pods := []*v1.Pod{groupPod("p0", "shared", false), groupPod("p1", "shared", false)}
			if tc.alone {
				pods = pods[:1]
			}
			if tc.own != nil {
				pods[0].Spec.ResourceClaims = append(pods[0].Spec.ResourceClaims, v1.PodResourceClaim{Name: "own", ResourceClaimName: ptr.To("own")})
			}
			group := newGroupCycle()
			if tc.filter || tc.usable {
				node := n2
				if tc.usable {
					node = n1
				}
				for _, p := range pods {
					cs := newCycleState()
					cs.group = group
					if _, st := c.pl.PreFilter(ctx, cs, p, nil); !st.IsSuccess() {
						t.Fatalf("PreFilter %s: %v", p.Name, st)
					}
					if st := c.pl.Filter(ctx, cs, p, node); st.IsSuccess() != tc.usable {
						t.Fatalf("Filter %s on %s: %v", p.Name, node.node.Name, st)
					}
				}
			}
			kind := tc.kind
			if kind == "" {
				kind = fwk.PodGroupKeyType
			}
			_, st := c.pl.PodGroupPostFilter(ctx, group, fakeGroupInfo{kind: kind, group: pg, pods: pods}, nil)
			if st.Code() != fwk.Unschedulable || st.Message() != tc.message {
				t.Errorf("PodGroupPostFilter: %v, want Unschedulable %q", st, tc.message)
			}
			// Each member the nodes rejected gets dractl's account, as
			// PostFilter gives a pod outside of a group.
			events := 0
			for len(c.handle.recorder.Events) > 0 {
				if e := <-c.handle.recorder.Events; !strings.HasPrefix(e, "Warning "+eventReason+" claim gpu: ") {
					t.Errorf("event %q", e)
				}
				events++
			}
			want := 0
			if tc.filter && kind != fwk.CompositePodGroupKeyType {
				want = len(pods)
			}
			if events != want {
				t.Errorf("%d %s events, want %d", events, eventReason, want)
			}
			for _, name := range []string{"shared", "own"} {
				got, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				if deallocated := got.Status.Allocation == nil; deallocated != (tc.dealloc == name) {
					t.Errorf("claim %s deallocated: %v, want %v", name, deallocated, tc.dealloc == name)
				}
				if name == "shared" && tc.dealloc != name && !apiequality.Semantic.DeepEqual(got.Status.ReservedFor, tc.reservedFor) {
					t.Errorf("claim shared reserved for %v, want %v", got.Status.ReservedFor, tc.reservedFor)
				}
			}
		})
	}
}

// TestPodGroupClaimOfAnotherGroup: a claim generated for another PodGroup
// is not the pod's, in the in-tree plugin's words.
func TestPodGroupClaimOfAnotherGroup(t *testing.T) {
	claim := groupClaim("shared", true)
	claim.OwnerReferences[0].Name = "other"
	c := newCluster(t, nil, append(gpuObjects(t), claim)...)
	c.handle.groups.groups["default/pg"] = podGroup("shared", true)
	_, st := c.pl.PreFilter(context.Background(), newCycleState(), groupPod("p0", "shared", true), nil)
	if !strings.Contains(st.Message(), "neither Pod nor PodGroup pg is the owner") {
		t.Errorf("PreFilter: %v", st)
	}
}

// TestGateLetsGroupMembersThrough: the bound on bindings in flight holds
// back the first member of a pod group cycle, not the later ones, whose
// wait would be for the earlier members of their own cycle, which are
// bound only after it.
func TestGateLetsGroupMembersThrough(t *testing.T) {
	c := newCluster(t, &Args{BindingsInFlight: ptr.To[int32](1)}, append(gpuObjects(t), groupClaim("shared", false))...)
	c.handle.groups.groups["default/pg"] = podGroup("shared", false)
	// No pod in flight goes stale however slowly the test runs.
	now := time.Now()
	c.pl.binder.gate.now = func() time.Time { return now }
	ctx := context.Background()
	group := newGroupCycle()
	p0 := groupPod("p0", "shared", false)
	cs0 := inGroupCycle(t, c, group, p0, node1)

	member := newCycleState()
	member.group = group
	if done := inBackground(t, c.pl.binder.gate, func() { _, _ = c.pl.PreFilter(ctx, member, groupPod("p1", "shared", false), nil) }); !returned(done) {
		t.Fatal("a later member of the group cycle waited for the first")
	}
	first := newCycleState()
	first.group = newGroupCycle()
	done := inBackground(t, c.pl.binder.gate, func() { _, _ = c.pl.PreFilter(ctx, first, groupPod("p2", "shared", false), nil) })
	if returned(done) {
		t.Fatal("the first member of the next group cycle did not wait for p0's binding")
	}
	c.pl.Unreserve(ctx, cs0, p0, node1.node.Name)
	<-done
}
