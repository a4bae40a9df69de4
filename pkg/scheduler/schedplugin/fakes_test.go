package schedplugin

import (
	"context"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/podclaims"
	"github.com/dractl/dractl/pkg/core/state"
)

// The fakes stand in for kube-scheduler's framework, which lives in
// k8s.io/kubernetes; the e2e tests run the plugin in the real scheduler.
// Methods the plugin does not call are left to the embedded nil
// interface and would panic.

// fakeTracker is a claim tracker: claims by namespace/name plus
// allocations in flight, as the scheduler's assume cache keeps them.
type fakeTracker struct {
	fwk.ResourceClaimTracker
	mu       sync.Mutex
	claims   map[string]*resourcev1.ResourceClaim
	inFlight map[types.UID]*resourcev1.ResourceClaim
	// sharers counts the pods sharing each allocation in flight.
	sharers map[types.UID]int
	// lookups counts Get and GetPendingAllocation calls.
	lookups int
}

func newFakeTracker() *fakeTracker {
	return &fakeTracker{claims: map[string]*resourcev1.ResourceClaim{}, inFlight: map[types.UID]*resourcev1.ResourceClaim{}, sharers: map[types.UID]int{}}
}

func (t *fakeTracker) set(c *resourcev1.ResourceClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.claims[c.Namespace+"/"+c.Name] = c
}

func (t *fakeTracker) Get(namespace, name string) (*resourcev1.ResourceClaim, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lookups++
	c, ok := t.claims[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(resourcev1.Resource("resourceclaims"), name)
	}
	return c, nil
}

func (t *fakeTracker) GetPendingAllocation(uid types.UID) *resourcev1.AllocationResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lookups++
	if c := t.inFlight[uid]; c != nil {
		return c.Status.Allocation
	}
	return nil
}

// SignalClaimPendingAllocation, like kube-scheduler's tracker, refuses a
// claim it does not hold, unless it is named as a claim not created yet;
// it adds a sharer to an allocation in flight; and a claim the assume
// cache has allocated is not put in flight.
func (t *fakeTracker) SignalClaimPendingAllocation(uid types.UID, c *resourcev1.ResourceClaim) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.inFlight[uid]; ok {
		t.sharers[uid]++
		return nil
	}
	cur, ok := t.claims[c.Namespace+"/"+c.Name]
	if !ok && c.Name != podclaims.ExtendedEntryName {
		return apierrors.NewNotFound(resourcev1.Resource("resourceclaims"), c.Name)
	}
	if cur != nil && cur.UID == uid && cur.Status.Allocation != nil {
		return nil
	}
	t.inFlight[uid] = c
	t.sharers[uid] = 1
	return nil
}

// MaybeRemoveClaimPendingAllocation takes a sharer away and ends the
// allocation's flight with the last one, or at once when forced.
func (t *fakeTracker) MaybeRemoveClaimPendingAllocation(uid types.UID, force bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.inFlight[uid]; !ok {
		return false
	}
	if t.sharers[uid]--; force || t.sharers[uid] == 0 {
		delete(t.inFlight, uid)
		delete(t.sharers, uid)
		return true
	}
	return false
}

func (t *fakeTracker) AssumeClaimAfterAPICall(c *resourcev1.ResourceClaim) error {
	t.set(c)
	return nil
}

func (t *fakeTracker) AssumedClaimRestore(string, string) {}

func (t *fakeTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	panic("the plugin keeps allocated devices in its State")
}

type fakeClasses struct {
	classes map[string]*resourcev1.DeviceClass
}

func (l fakeClasses) Get(name string) (*resourcev1.DeviceClass, error) {
	if c, ok := l.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

func (l fakeClasses) List() ([]*resourcev1.DeviceClass, error) {
	var out []*resourcev1.DeviceClass
	for _, c := range l.classes {
		out = append(out, c)
	}
	return out, nil
}

type fakeDRA struct {
	fwk.SharedDRAManager
	tracker *fakeTracker
	classes fakeClasses
}

func (d *fakeDRA) ResourceClaims() fwk.ResourceClaimTracker { return d.tracker }
func (d *fakeDRA) DeviceClasses() fwk.DeviceClassLister     { return d.classes }

// DeviceClassResolver maps extended resource names as kube-scheduler's
// DRA manager does, through the cache of k8s.io/dynamic-resource-allocation.
func (d *fakeDRA) DeviceClassResolver() fwk.DeviceClassResolver {
	cache := extendedresourcecache.NewExtendedResourceCache(klog.Background())
	for _, c := range d.classes.classes {
		cache.OnAdd(c, true)
	}
	return cache
}

type fakeHandle struct {
	fwk.Handle
	dra      *fakeDRA
	groups   *fakeGroups
	client   kubernetes.Interface
	informer informers.SharedInformerFactory
	recorder *events.FakeRecorder

	mu sync.Mutex
	// activated are the pods (namespace/name) sent back to the active
	// queue, in order.
	activated []string
}

func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range pods {
		h.activated = append(h.activated, p.Namespace+"/"+p.Name)
	}
}

// takeActivated returns the pods activated since the last call.
func (h *fakeHandle) takeActivated() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.activated
	h.activated = nil
	return out
}

// profile is the scheduling profile of the plugin under test.
const profile = "dractl"

func (h *fakeHandle) ProfileName() string                                    { return profile }
func (h *fakeHandle) SharedDRAManager() fwk.SharedDRAManager                 { return h.dra }
func (h *fakeHandle) ClientSet() kubernetes.Interface                        { return h.client }
func (h *fakeHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.informer }
func (h *fakeHandle) EventRecorder() events.EventRecorderLogger              { return h.recorder }
func (h *fakeHandle) SnapshotSharedLister() fwk.SharedLister                 { return fakeSnapshot{groups: h.groups} }
func (h *fakeHandle) PodGroupManager() fwk.PodGroupManager                   { return fakeGroupManager{groups: h.groups} }

// fakeGroups are the scheduler's PodGroups and how many pods of each are
// scheduled. Its Get is the PodGroupLister's.
type fakeGroups struct {
	groups    map[string]*schedulingv1beta1.PodGroup
	scheduled map[string]int
}

func (g *fakeGroups) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	if pg, ok := g.groups[namespace+"/"+name]; ok {
		return pg, nil
	}
	return nil, apierrors.NewNotFound(schedulingv1beta1.Resource("podgroups"), name)
}

// fakeSnapshot serves fakeGroups as the scheduler's snapshot.
type fakeSnapshot struct {
	fwk.SharedLister
	groups *fakeGroups
}

func (s fakeSnapshot) PodGroups() fwk.PodGroupLister { return s.groups }

// fakeGroupManager serves fakeGroups as the scheduler's pod group manager.
type fakeGroupManager struct {
	fwk.PodGroupManager
	groups *fakeGroups
}

func (m fakeGroupManager) PodGroupStates() fwk.PodGroupStateLister { return fakeGroupStates{m.groups} }

// fakeGroupStates is the PodGroupStateLister side of fakeGroups, whose Get
// has another signature.
type fakeGroupStates struct{ *fakeGroups }

func (g fakeGroupStates) Get(namespace, name string) (fwk.PodGroupState, error) {
	return fakeGroupState{scheduled: g.scheduled[namespace+"/"+name]}, nil
}

type fakeGroupState struct {
	fwk.PodGroupState
	scheduled int
}

func (s fakeGroupState) ScheduledPodsCount() int { return s.scheduled }

// fakeGroupCycle is the state of one pod group cycle.
type fakeGroupCycle struct {
	fwk.PodGroupCycleState
	data map[fwk.StateKey]fwk.StateData
}

func newGroupCycle() *fakeGroupCycle { return &fakeGroupCycle{data: map[fwk.StateKey]fwk.StateData{}} }

func (s *fakeGroupCycle) Read(key fwk.StateKey) (fwk.StateData, error) {
	if d, ok := s.data[key]; ok {
		return d, nil
	}
	return nil, fwk.ErrNotFound
}

func (s *fakeGroupCycle) Write(key fwk.StateKey, d fwk.StateData) { s.data[key] = d }

type fakeCycleState struct {
	fwk.CycleState
	data map[fwk.StateKey]fwk.StateData
	// group is the state of the pod group cycle the pod is scheduled in;
	// nil outside of one.
	group fwk.PodGroupCycleState
}

func newCycleState() *fakeCycleState {
	return &fakeCycleState{data: map[fwk.StateKey]fwk.StateData{}}
}

func (s *fakeCycleState) Read(key fwk.StateKey) (fwk.StateData, error) {
	if d, ok := s.data[key]; ok {
		return d, nil
	}
	return nil, fwk.ErrNotFound
}

func (s *fakeCycleState) Write(key fwk.StateKey, d fwk.StateData) { s.data[key] = d }

type fakeNodeInfo struct {
	fwk.NodeInfo
	node *v1.Node
	// allocatable are the node's scalar resources (device plugins').
	allocatable map[v1.ResourceName]int64
}

func (n fakeNodeInfo) Node() *v1.Node { return n.node }

func (n fakeNodeInfo) GetAllocatable() fwk.Resource { return fakeResource{scalars: n.allocatable} }

type fakeResource struct {
	fwk.Resource
	scalars map[v1.ResourceName]int64
}

func (r fakeResource) GetScalarResources() map[v1.ResourceName]int64 { return r.scalars }

// cluster is a plugin running against a fake API holding objs, whose
// claims are also in the tracker (the scheduler's assume cache).
type cluster struct {
	pl      *Plugin
	client  *fake.Clientset
	tracker *fakeTracker
	handle  *fakeHandle
	ctx     context.Context
}

func newCluster(t testing.TB, args runtime.Object, objs ...runtime.Object) *cluster {
	t.Helper()
	c := newUnstartedCluster(t, args, objs...)
	c.start()
	return c
}

// start starts the informers and waits until they have listed.
func (c *cluster) start() {
	c.handle.informer.Start(c.ctx.Done())
	c.handle.informer.WaitForCacheSync(c.ctx.Done())
}

// newUnstartedCluster is newCluster before the informers have started,
// as the plugin is while kube-scheduler starts.
func newUnstartedCluster(t testing.TB, args runtime.Object, objs ...runtime.Object) *cluster {
	t.Helper()
	return newUnstartedClusterWith(t, AllFeatures, args, objs...)
}

// newClusterWith is newCluster with the feature gates fts.
func newClusterWith(t testing.TB, fts Features, args runtime.Object, objs ...runtime.Object) *cluster {
	t.Helper()
	c := newUnstartedClusterWith(t, fts, args, objs...)
	c.start()
	return c
}

func newUnstartedClusterWith(t testing.TB, fts Features, args runtime.Object, objs ...runtime.Object) *cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	tracker := newFakeTracker()
	classes := fakeClasses{classes: map[string]*resourcev1.DeviceClass{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *resourcev1.ResourceClaim:
			tracker.set(o)
		case *resourcev1.DeviceClass:
			classes.classes[o.Name] = o
		}
	}
	groups := &fakeGroups{groups: map[string]*schedulingv1beta1.PodGroup{}, scheduled: map[string]int{}}
	h := &fakeHandle{dra: &fakeDRA{tracker: tracker, classes: classes}, groups: groups, client: client,
		informer: informers.NewSharedInformerFactory(client, 0), recorder: events.NewFakeRecorder(10)}
	// kube-scheduler starts its own slice tracker on the shared
	// informers before it builds the profiles.
	inf := h.informer.Resource().V1()
	if _, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{EnableDeviceTaintRules: true,
		SliceInformer: trackerSliceInformer(h.informer), TaintInformer: inf.DeviceTaintRules(), KubeClient: client}); err != nil {
		cancel()
		t.Fatal(err)
	}
	pl, err := New(ctx, args, h, fts, state.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		h.informer.Shutdown()
	})
	return &cluster{pl: pl, client: client, tracker: tracker, handle: h, ctx: ctx}
}

// inline asks for dractl's explanation in the pod's condition, which the
// tests of the explanation read.
var inline = &Args{Explanation: ExplanationInline}
