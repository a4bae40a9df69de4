package schedplugin

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/podclaims"
)

// podClaim is one entry of pod.spec.resourceClaims and its claim, or
// the pod's extended-resource claim (extended).
type podClaim struct {
	// name is the entry's name, which is how users know the claim.
	name  string
	claim *resourcev1.ResourceClaim
	// extended: the pod's extended-resource claim (KEP-5004), always the
	// pod's own.
	extended bool
	// index is the entry's position in pod.spec.resourceClaims (-1 for
	// the extended-resource claim).
	index int
	// consumer is what PreBind reserves the claim for: the pod, or its
	// PodGroup (set in PreFilter, see consumers).
	consumer resourcev1.ResourceClaimConsumerReference
}

// claimIndex finds a pod's claims, and the pods a claim event may
// concern: it is what PreEnqueue, SignPod, PreFilter and the queueing
// hints (EventsToRegister) look claims up with. New fills it in before
// the informers start, and nothing changes it after, so it needs no
// lock.
type claimIndex struct {
	dra fwk.SharedDRAManager
	fts Features
	// extendedClaimOf finds the extended-resource claim an earlier
	// attempt created for a pod (nil: DRAExtendedResource is off; see
	// indexExtendedClaims).
	extendedClaimOf func(*v1.Pod) *resourcev1.ResourceClaim
	// claimsListed reports whether the claim informer has listed every
	// claim (see PreEnqueue).
	claimsListed cache.InformerSynced
	// podsByClaimName indexes the scheduler's pods, under index
	// podsByClaimIndex, by the claims they reference (see podsOfClaim).
	podsByClaimName  cache.Indexer
	podsByClaimIndex string
}

// resolver is the plugin's pod → claim resolver: the claim tracker's
// claims, and, with DRAExtendedResource, the extended resources that the
// scheduler's DeviceClass cache maps (the one NodeResourcesFit reads, so
// that both plugins agree which resources are DRA's).
func (ci *claimIndex) resolver() podclaims.Resolver {
	r := podclaims.Resolver{Claim: ci.dra.ResourceClaims().Get, AcceptPodGroupOwner: ci.fts.WorkloadResourceClaims}
	if ci.fts.ExtendedResource {
		r.Classes = ci.dra.DeviceClassResolver()
		r.ExtendedClaim = ci.extendedClaimOf
	}
	return r
}

// podClaims looks up every claim the pod references in the claim tracker,
// through the resolver every part of dractl shares (pkg/core/podclaims). An
// error means the pod cannot be scheduled yet: a claim is missing (not
// generated yet, or not in the informer yet), is being deleted, or was
// generated for another pod; it is worded as the in-tree plugin words it.
// Entries without a claim (a template that produced none) are skipped.
// ext is what the pod asks of extended resources that DeviceClasses
// back, when their claim is yet to be made; an extended-resource claim
// made by an earlier attempt is among the claims instead.
func (ci *claimIndex) podClaims(pod *v1.Pod) (claims []podClaim, ext *podclaims.Extended, err error) {
	entries, err := ci.resolver().Resolve(pod)
	if err != nil {
		return nil, nil, err
	}
	out := make([]podClaim, 0, len(entries))
	for _, e := range entries {
		if e.Extended != nil && e.Claim == nil {
			ext = e.Extended
			continue
		}
		out = append(out, podClaim{name: e.Name, claim: e.Claim, extended: e.Extended != nil, index: e.Index})
	}
	return out, ext, nil
}

// PreEnqueue keeps a pod out of the scheduling queue while one of its
// claims does not exist or is not usable by it; a claim or pod event
// brings it back (see EventsToRegister).
//
// Until the claim informer has listed every claim, a missing claim may
// only not have arrived yet, and the pod is let in: no cycle runs before
// the scheduler's caches are synced, and PreFilter looks again then.
// Gating instead would, when a scheduler starts with many pending pods,
// make the queue ask every gated pod about every claim the informer then
// adds (pods × claims queueing-hint calls).
func (pl *Plugin) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	if pl.claims.maySkip(pod) {
		return nil
	}
	if _, _, err := pl.claims.podClaims(pod); err != nil {
		if !pl.claims.claimsListed() {
			return nil
		}
		return unresolvable(klog.FromContext(ctx), err.Error())
	}
	return nil
}

// SignPod implements fwk.SignPlugin. Pods without claims add nothing to
// their signature, so kube-scheduler may batch them (KEP-5598); a profile
// whose plugins do not all sign batches no pod at all. A pod with claims
// is not signable: its claims are its own, and where they fit changes
// with every allocation, as the in-tree plugin also decides. So is a pod
// whose extended resources a DeviceClass backs.
func (pl *Plugin) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if len(pod.Spec.ResourceClaims) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, reasonUnsignableClaims)
	}
	if !pl.claims.maySkip(pod) {
		if ext, err := podclaims.ExtendedOf(pod, pl.dra.DeviceClassResolver()); err != nil || ext != nil {
			return nil, fwk.NewStatus(fwk.Unschedulable, reasonUnsignableExtended)
		}
	}
	return nil, nil
}

// EventsToRegister lists the events that can make a pod this plugin
// rejected schedulable, with hints that skip events that cannot.
func (pl *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// Node labels can satisfy a node selector of a device or allocation.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAllocatable}},
		// Claims: created for the pod, allocated or deallocated.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: pl.claims.afterClaimChange, PreQueueingHintFn: pl.claims.podsOfClaim},
		// The resourceclaim controller records generated claims in the pod.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodGeneratedResourceClaim}, QueueingHintFn: pl.claims.afterPodUpdate},
		// A class the pod waits for appears, or its selectors change.
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.claims.afterClassChange},
		// New devices, or devices that changed.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.claims.afterSliceChange},
	}, nil
}

// afterClaimChange: a deallocation or an allocated claim's deletion frees
// devices for any pod; otherwise only a change to one of the pod's own
// claims matters, and of those only creation and status changes (the
// finalizer alone changes nothing). The event may reach the queue before
// the State has it; the waitlist then brings the pod back.
func (ci *claimIndex) afterClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	if freedDevices(oldObj, newObj) {
		return fwk.Queue, nil
	}
	old, _ := oldObj.(*resourcev1.ResourceClaim)
	cur, _ := newObj.(*resourcev1.ResourceClaim)
	switch {
	case old == nil && cur == nil:
		return fwk.Queue, fmt.Errorf("unexpected objects %T, %T in a ResourceClaim event", oldObj, newObj)
	case cur == nil && podclaims.IsExtendedClaimOf(pod, old):
		// The pod's stale extended-resource claim is gone (PostFilter
		// deleted it): the next attempt makes a new one.
		return fwk.Queue, nil
	case cur == nil:
		// An unallocated claim was deleted.
		return fwk.QueueSkip, nil
	case !references(pod, cur):
		// Every claim event is asked about every waiting pod (at start-up,
		// every claim about every pod whose claims were not there yet):
		// the names decide without looking anything up.
		return fwk.QueueSkip, nil
	}
	claims, _, err := ci.podClaims(pod)
	if err != nil {
		logger.V(6).Info("Pod still not schedulable after claim change", "pod", klog.KObj(pod), "claim", klog.KObj(cur), "reason", err)
		return fwk.QueueSkip, nil
	}
	uses := false
	for _, pc := range claims {
		uses = uses || pc.claim.UID == cur.UID
	}
	switch {
	case !uses:
		return fwk.QueueSkip, nil
	case old == nil:
		return fwk.Queue, nil
	case apiequality.Semantic.DeepEqual(&old.Status, &cur.Status):
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// freedDevices reports whether a claim event may have freed devices for
// any pod: a deallocation, the deletion of an allocated claim, or a
// deletion whose last state is unknown.
func freedDevices(oldObj, newObj any) bool {
	if _, ok := oldObj.(cache.DeletedFinalStateUnknown); ok && newObj == nil {
		return true
	}
	old, _ := oldObj.(*resourcev1.ResourceClaim)
	cur, _ := newObj.(*resourcev1.ResourceClaim)
	return old != nil && old.Status.Allocation != nil && (cur == nil || cur.Status.Allocation == nil)
}

// podsOfClaim narrows a claim event to the pods afterClaimChange could
// requeue for it (with the SchedulerPreQueueingHints feature, kube-scheduler
// then asks only them): every pod when devices were freed, else the pods
// that name the claim and the pod that controls it.
func (ci *claimIndex) podsOfClaim(_ klog.Logger, oldObj, newObj any) (fwk.PreQueueingHintResult, error) {
	all := fwk.PreQueueingHintResult{AllPods: true}
	if freedDevices(oldObj, newObj) {
		return all, nil
	}
	old, _ := oldObj.(*resourcev1.ResourceClaim)
	cur, _ := newObj.(*resourcev1.ResourceClaim)
	switch {
	case cur == nil && old == nil:
		// Objects of another kind: let every pod's hint decide.
		return all, nil
	case cur == nil:
		// An unallocated claim was deleted: it matters only to the pod
		// whose extended-resource claim it was.
		if owner := metav1.GetControllerOf(old); owner != nil && owner.Kind == "Pod" && old.Annotations[resourcev1.ExtendedResourceClaimAnnotation] == "true" {
			return fwk.PreQueueingHintResult{Pods: []types.NamespacedName{{Namespace: old.Namespace, Name: owner.Name}}}, nil
		}
		return fwk.PreQueueingHintResult{}, nil
	}
	objs, err := ci.podsByClaimName.ByIndex(ci.podsByClaimIndex, cur.Namespace+"/"+cur.Name)
	if err != nil {
		return all, err
	}
	var out fwk.PreQueueingHintResult
	for _, o := range objs {
		if pod, ok := o.(*v1.Pod); ok {
			out.Pods = append(out.Pods, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
	// The pod a generated claim is for, if its status does not name the
	// claim yet.
	if owner := metav1.GetControllerOf(cur); owner != nil && owner.Kind == "Pod" && owner.APIVersion == "v1" {
		if nn := (types.NamespacedName{Namespace: cur.Namespace, Name: owner.Name}); !slices.Contains(out.Pods, nn) {
			out.Pods = append(out.Pods, nn)
		}
	}
	return out, nil
}

// afterPodUpdate: the pod's generated claims were recorded; requeue once
// all of them are there.
func (ci *claimIndex) afterPodUpdate(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	cur, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("unexpected object %T in a Pod event", newObj)
	}
	if _, _, err := ci.podClaims(cur); err != nil {
		logger.V(6).Info("Pod still not schedulable after update", "pod", klog.KObj(pod), "reason", err)
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// afterClassChange: a class change matters to pods whose claims name the
// class; pods whose claims the plugin cannot read are left to the claim
// events.
func (ci *claimIndex) afterClassChange(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	class, ok := newObj.(*resourcev1.DeviceClass)
	if !ok {
		return fwk.Queue, fmt.Errorf("unexpected object %T in a DeviceClass event", newObj)
	}
	claims, ext, err := ci.podClaims(pod)
	if err != nil {
		return fwk.QueueSkip, nil
	}
	if ext != nil {
		// Any class may now back, or stop backing, one of its extended
		// resources; class changes are rare.
		return fwk.Queue, nil
	}
	for _, pc := range claims {
		if usesClass(pc.claim, class.Name) {
			return fwk.Queue, nil
		}
	}
	logger.V(6).Info("DeviceClass unrelated to the pod", "pod", klog.KObj(pod), "class", class.Name)
	return fwk.QueueSkip, nil
}

func usesClass(c *resourcev1.ResourceClaim, class string) bool {
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.DeviceClassName == class {
			return true
		}
		for _, s := range r.FirstAvailable {
			if s.DeviceClassName == class {
				return true
			}
		}
	}
	return false
}

// afterSliceChange: a new slice, or a slice whose spec changed, may offer
// what was missing; an update that leaves the spec alone (labels, owner
// references) cannot. The API server bumps metadata.generation exactly
// when the spec changes, which is cheaper to compare than the spec for
// every waiting pod.
//
// A pod whose claims are not all there (PreEnqueue turned it away) waits
// for them, not for devices: the claims' events bring it back. At
// start-up every slice event is asked about every pod whose claims the
// informers had not delivered yet, and requeueing each would run its
// PreEnqueue again for nothing.
func (ci *claimIndex) afterSliceChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	cur, ok := newObj.(*resourcev1.ResourceSlice)
	if !ok {
		return fwk.Queue, fmt.Errorf("unexpected object %T in a ResourceSlice event", newObj)
	}
	if old, _ := oldObj.(*resourcev1.ResourceSlice); old != nil && old.Generation == cur.Generation {
		return fwk.QueueSkip, nil
	}
	if _, _, err := ci.podClaims(pod); err != nil {
		logger.V(6).Info("Pod waits for its claims, not for devices", "pod", klog.KObj(pod), "reason", err)
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// references reports whether the pod may use the claim: by name, or as
// the claim generated from one of its templates, which the pod controls
// (the resourceclaim controller makes it so).
func references(pod *v1.Pod, claim *resourcev1.ResourceClaim) bool {
	if claim.Namespace != pod.Namespace {
		return false
	}
	for i := range pod.Spec.ResourceClaims {
		if name := pod.Spec.ResourceClaims[i].ResourceClaimName; name != nil && *name == claim.Name {
			return true
		}
	}
	return metav1.IsControlledBy(claim, pod)
}

// indexClaimNames indexes the scheduler's pods by the claims they
// reference (see claimKeys); a generated claim whose name the pod's status
// does not carry yet is known by its controlling pod instead.
func (ci *claimIndex) indexClaimNames(pods cache.SharedIndexInformer, profile string) error {
	name := Name + "/pods-by-claim-name-" + profile
	err := pods.AddIndexers(cache.Indexers{name: func(obj any) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return nil, nil
		}
		return claimKeys(pod), nil
	}})
	if err != nil {
		return fmt.Errorf("index pods by claim name: %w", err)
	}
	ci.podsByClaimName, ci.podsByClaimIndex = pods.GetIndexer(), name
	return nil
}

// claimKeys are the claims ("namespace/name") the pod references; a
// template's claim is known once the pod's status names it.
func claimKeys(pod *v1.Pod) []string {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	keys := make([]string, 0, len(pod.Spec.ResourceClaims))
	for i := range pod.Spec.ResourceClaims {
		if claim, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && claim != nil {
			keys = append(keys, pod.Namespace+"/"+*claim)
		}
	}
	return keys
}
