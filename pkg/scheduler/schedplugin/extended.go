package schedplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/podclaims"
	"github.com/dractl/dractl/pkg/core/state"
)

// Extended resources backed by DRA (KEP-5004). A pod that asks for an
// extended resource a DeviceClass backs, on a node that does not
// advertise it, gets its devices in a claim the scheduler creates: the
// pod's rule is pkg/core/podclaims' (which pods, which node, which requests),
// this file is the claim's life in a scheduling cycle.
//
// kube-scheduler creates the claim in PreBind with generateName and
// learns its name from the API server. This plugin picks the name in
// PreFilter instead (the generateName and five random characters, as the
// API server would), so that the State can hold the claim's allocation
// under one key from Reserve on; a name that is taken fails the create,
// and the next attempt picks another. Until the claim exists, the
// framework's claim tracker knows the allocation under a placeholder UID,
// as it does for kube-scheduler's, so that NodeResourcesFit and other
// profiles count its devices.

// trackerWait bounds how long PreBind waits for the claim tracker to show
// a claim it created (kube-scheduler waits as long), before it takes the
// allocation out of flight regardless.
const trackerWait = 2 * time.Minute

// extendedState is the pod's extended-resource claim in one cycle.
type extendedState struct {
	ext *podclaims.Extended
	// namespace and name are the claim's, uid the placeholder UID the
	// claim tracker knows it by until it is created.
	namespace, name string
	uid             types.UID

	// Under cycleState.mu: the claim and cycle per Need, made when a
	// node first needs them, and each node's variant.
	variants map[podclaims.Need]*variant
	nodes    map[string]*variant

	// Set by Reserve: the claim with the chosen node's allocation and
	// its mappings, and whether the allocation is in the claim tracker's
	// flight. Set by PreBind: the claim as created, and whether its
	// allocation was written.
	reserved *resourcev1.ResourceClaim
	mappings []v1.ContainerExtendedResourceRequest
	inFlight bool
	created  *resourcev1.ResourceClaim
	written  bool
}

// variant is the claim for nodes with one Need, and the cycle that
// allocates it with the pod's pending claims (nil claim: nothing for DRA
// on those nodes, and the cycle is the pending claims' alone).
type variant struct {
	claim    *resourcev1.ResourceClaim
	mappings []v1.ContainerExtendedResourceRequest
	cycle    *state.Cycle
}

func newExtendedState(ext *podclaims.Extended, pod *v1.Pod) *extendedState {
	return &extendedState{
		ext:       ext,
		namespace: pod.Namespace,
		name:      podclaims.ExtendedClaimName(pod.Name, utilrand.String(5)),
		uid:       uuid.NewUUID(),
		variants:  map[podclaims.Need]*variant{},
		nodes:     map[string]*variant{},
	}
}

// extendedVariant returns the variant for a node with need, making it
// on first use, and records it as the node's.
func (s *cycleState) extendedVariant(node string, need podclaims.Need) *variant {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.ext
	v := x.variants[need]
	if v == nil {
		v = &variant{cycle: s.cycle}
		v.claim, v.mappings = x.ext.Claim(need, x.name)
		if v.claim != nil {
			v.claim.UID = x.uid
			v.cycle = s.snap.Cycle(append(slices.Clip(s.toAllocate), v.claim), s.opts)
		}
		x.variants[need] = v
	}
	x.nodes[node] = v
	return v
}

// maySkip reports whether the pod asks for nothing the plugin looks at:
// no claims, and no container request with a domain, which every
// extended resource name has.
func (ci *claimIndex) maySkip(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return false
	}
	if !ci.fts.ExtendedResource {
		return true
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for name := range cs[i].Resources.Requests {
				if strings.Contains(string(name), "/") {
					return false
				}
			}
		}
	}
	return true
}

// extendedClaimIndex indexes claims annotated as extended-resource
// claims by the UID of the pod that controls them.
const extendedClaimIndex = Name + "/extended-resource-claims"

func extendedClaimOwner(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok || c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" {
		return nil, nil
	}
	if owner := metav1.GetControllerOf(c); owner != nil && owner.Kind == "Pod" {
		return []string{string(owner.UID)}, nil
	}
	return nil, nil
}

// indexExtendedClaims lets PreFilter find a pod's extended-resource claim
// an earlier attempt created without looking at every claim. Profiles
// share the claim informer, and the index.
func (ci *claimIndex) indexExtendedClaims(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[extendedClaimIndex]; !ok {
		if err := inf.AddIndexers(cache.Indexers{extendedClaimIndex: extendedClaimOwner}); err != nil {
			return fmt.Errorf("index extended-resource claims: %w", err)
		}
	}
	indexer := inf.GetIndexer()
	ci.extendedClaimOf = func(pod *v1.Pod) *resourcev1.ResourceClaim {
		objs, err := indexer.ByIndex(extendedClaimIndex, string(pod.UID))
		if err != nil {
			return nil
		}
		for _, o := range objs {
			if c, ok := o.(*resourcev1.ResourceClaim); ok && podclaims.IsExtendedClaimOf(pod, c) {
				return c
			}
		}
		return nil
	}
	return nil
}

// reserveExtended assumes the chosen node's allocation of the
// extended-resource claim: in the State, under the claim it will be, and
// in the claim tracker under the placeholder UID.
func (pl *Plugin) reserveExtended(s *cycleState, v *variant, a *resourcev1.AllocationResult) error {
	x := s.ext
	c := v.claim.DeepCopy()
	c.Finalizers = append(c.Finalizers, resourcev1.Finalizer)
	c.Status.Allocation = a
	if err := pl.feed.assumeNew(v.claim, c); err != nil {
		return fmt.Errorf("assume allocation of the extended-resource claim %s: %w", klog.KObj(c), err)
	}
	x.reserved, x.mappings = c, v.mappings
	// The claim tracker looks an in-flight claim up by name to see
	// whether it is allocated already, except under kube-scheduler's name
	// for a claim not created yet.
	inMemory := *c
	inMemory.Name = podclaims.ExtendedEntryName
	if err := pl.dra.ResourceClaims().SignalClaimPendingAllocation(x.uid, &inMemory); err != nil {
		return fmt.Errorf("signal allocation of the extended-resource claim %s: %w", klog.KObj(c), err)
	}
	x.inFlight = true
	return nil
}

// bindExtended creates the extended-resource claim, writes its allocation
// and reservation, and records in the pod's status which request serves
// which container, which is what the kubelet reads.
func (pl *Plugin) bindExtended(ctx context.Context, s *cycleState, pod *v1.Pod) error {
	logger := klog.FromContext(ctx)
	x := s.ext
	if x.created == nil {
		c := x.reserved.DeepCopy()
		// The finalizer goes in with the claim, so that the allocation
		// written next is protected without another write.
		c.UID, c.Status = "", resourcev1.ResourceClaimStatus{}
		created, err := pl.clientset.ResourceV1().ResourceClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create claim for extended resources %s: %w", klog.KObj(c), err)
		}
		logger.V(5).Info("Created the extended-resource claim", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(created))
		x.created = created
		pl.feed.created(created)
	}
	key := state.KeyOf(x.created)
	stored, err := pl.binder.bindClaim(ctx, x.created, x.reserved.Status.Allocation, podConsumer(pod))
	if err != nil {
		var uw *uncertainWriteError
		if errors.As(err, &uw) {
			x.written = true
			pl.feed.mayBeWritten(key, uw.base)
		}
		return err
	}
	x.created, x.written = stored, true
	pl.feed.written(key, stored.ResourceVersion)
	if err := patchExtendedStatus(ctx, pl.clientset, pod, stored.Name, x.mappings); err != nil {
		return err
	}
	awaitTracker(ctx, pl.dra.ResourceClaims(), stored)
	pl.dra.ResourceClaims().MaybeRemoveClaimPendingAllocation(x.uid, true)
	x.inFlight = false
	// From here on it is one of the pod's claims: binding conditions
	// are waited for, and Unreserve takes the reservation back, as for
	// the others.
	s.claims = append(s.claims, podClaim{name: podclaims.ExtendedEntryName, claim: stored, extended: true})
	return nil
}

// patchExtendedStatus writes the pod's status.extendedResourceClaimStatus.
// A merge patch replaces the mappings of an earlier attempt whole; the
// UID makes it fail for another pod of the same name.
func patchExtendedStatus(ctx context.Context, client kubernetes.Interface, pod *v1.Pod, claim string, mappings []v1.ContainerExtendedResourceRequest) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{"extendedResourceClaimStatus": v1.PodExtendedResourceClaimStatus{
			RequestMappings: mappings, ResourceClaimName: claim,
		}},
	})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("update pod %s extendedResourceClaimStatus: %w", klog.KObj(pod), err)
	}
	return nil
}

// awaitTracker waits until the claim tracker holds the created claim with
// its allocation: taken out of flight before, its devices would look free
// to NodeResourcesFit and to other profiles until the informer delivers
// the claim.
func awaitTracker(ctx context.Context, tr fwk.ResourceClaimTracker, stored *resourcev1.ResourceClaim) {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, trackerWait, true, func(context.Context) (bool, error) {
		cur, err := tr.Get(stored.Namespace, stored.Name)
		if err != nil || cur.UID != stored.UID {
			return false, nil
		}
		if cur.Status.Allocation == nil {
			if err := tr.AssumeClaimAfterAPICall(stored); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		klog.FromContext(ctx).V(5).Info("Extended-resource claim not in the claim tracker", "resourceclaim", klog.KObj(stored), "err", err)
	}
}

// unreserveExtended undoes reserveExtended and the part of bindExtended
// that succeeded. A created claim is deleted unless the binding may have
// been sent (preBound), in which case the pod may be running with it; the
// next attempt of a pod left unbound finds it and PostFilter deletes it.
func (pl *Plugin) unreserveExtended(ctx context.Context, s *cycleState) {
	x := s.ext
	if x == nil || x.reserved == nil {
		return
	}
	key := state.KeyOf(x.reserved)
	if x.inFlight {
		pl.dra.ResourceClaims().MaybeRemoveClaimPendingAllocation(x.uid, false)
		x.inFlight = false
	}
	if !x.written {
		pl.feed.forgetUnwritten(key)
	}
	if x.created == nil {
		pl.feed.dropPlaceholder(key, x.uid)
	} else if !s.preBound {
		if err := pl.binder.deleteClaim(ctx, x.created); err != nil {
			klog.FromContext(ctx).Error(err, "Delete extended-resource claim", "resourceclaim", klog.KObj(x.created))
		}
		x.created, x.written = nil, false
	}
	x.reserved, x.mappings = nil, nil
}
