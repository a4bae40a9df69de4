package schedplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/internal/claimlock"
)

// Errors of the binding-conditions wait in PreBind.
var (
	ErrBindingTimeout = errors.New("device binding timeout")
	ErrBindingFailed  = errors.New("device binding failed")
)

// binder writes the plugin's claims to the API server: PreBind's
// finalizer, allocation and reservation (bindClaim) and its wait for
// binding conditions (claimsReadyForBinding), and the writes that take
// them back: unreserve (Unreserve, PodGroupPostFilter), deallocate
// (PostFilter, PodGroupPostFilter) and deleteClaim of an extended-resource
// claim. It holds the gate that paces scheduling cycles to PreBind's
// writes, since the gate counts the pods whose writes are still to come.
type binder struct {
	clientset kubernetes.Interface
	dra       fwk.SharedDRAManager
	// conditions: DRADeviceBindingConditions is on; PreBind waits up to
	// timeout for the devices' binding conditions.
	conditions bool
	timeout    time.Duration
	// writing takes the writes of one claim in turn (see bindClaim): the
	// members of a pod group are bound concurrently and share claims. It
	// locks per claim, so that writes of unrelated claims, each an API
	// round trip, do not queue behind each other, and it is no other
	// lock of the plugin: it is held across API calls, which the feed's
	// and the waitlist's holders (the informers' handlers, Filter) must
	// never wait for.
	writing claimlock.Locks
	// gate paces the cycles to the binding cycles (nil: no bound).
	gate *bindGate
}

// bindingPollInterval is how often PreBind looks at the claims while it
// waits for binding conditions (the in-tree plugin's interval).
const bindingPollInterval = 5 * time.Second

// PreBindPreFlight implements fwk.PreBindPlugin: PreBind has work for
// every pod with claims and may run in parallel with other plugins.
func (pl *Plugin) PreBindPreFlight(ctx context.Context, cs fwk.CycleState, _ *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	result := &fwk.PreBindPreFlightResult{AllowParallel: true}
	s, err := readState(cs)
	if err != nil {
		return result, asError(klog.FromContext(ctx), err)
	}
	if len(s.claims) == 0 && s.ext == nil {
		return result, fwk.NewStatus(fwk.Skip)
	}
	return result, nil
}

// PreBind writes what Reserve assumed: the finalizer, the allocation and
// the pod in reservedFor; then, when devices have binding conditions, it
// waits for them.
func (pl *Plugin) PreBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	logger := klog.FromContext(ctx)
	s, err := readState(cs)
	if err != nil {
		return asError(logger, err)
	}
	if len(s.claims) == 0 && s.ext == nil {
		return nil
	}
	// Past Reserve for good: no node's results are read any more.
	pl.results.release(s)
	defer pl.binder.gate.release(pod.UID)
	pendingAt := map[int]int{}
	for j, i := range s.pending {
		pendingAt[i] = j
	}
	for i, pc := range s.claims {
		if pl.fts.reservedFor(pod, pc.claim) {
			continue
		}
		allocation := s.shared[i]
		j, pending := pendingAt[i]
		if pending {
			allocation = s.allocations[j]
		}
		c, err := pl.binder.bindClaim(ctx, pc.claim, allocation, pc.consumer)
		if err != nil {
			var uw *uncertainWriteError
			if allocation != nil && errors.As(err, &uw) {
				if pending {
					s.written[j] = true
				}
				pl.feed.mayBeWritten(state.KeyOf(pc.claim), uw.base)
			}
			return asError(logger, err)
		}
		s.claims[i].claim = c
		if pending {
			s.written[j] = true
			allocationOutcomes.WithLabelValues(pl.fh.ProfileName(), claimKind(pod, pc), OutcomeWritten).Inc()
		}
		if allocation != nil {
			pl.feed.written(state.KeyOf(c), c.ResourceVersion)
		}
	}
	// Written: the allocations are no longer in flight, for any pod that
	// shares them either.
	for j, i := range s.pending {
		pl.dra.ResourceClaims().MaybeRemoveClaimPendingAllocation(s.claims[i].claim.UID, true)
		s.inFlight[j] = false
	}
	for i := range s.sharing {
		pl.dra.ResourceClaims().MaybeRemoveClaimPendingAllocation(s.claims[i].claim.UID, true)
		delete(s.sharing, i)
	}
	if s.ext != nil && s.ext.reserved != nil {
		if err := pl.bindExtended(ctx, s, pod); err != nil {
			return asError(logger, err)
		}
	}
	if err := pl.nodeResources.write(ctx, s, pod); err != nil {
		return asError(logger, err)
	}
	if !pl.fts.BindingConditions || !hasBindingConditions(s) {
		s.preBound = true
		return nil
	}
	// Waiting for devices is not the API server's work.
	pl.binder.gate.release(pod.UID)
	pl.fh.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, eventBindingConditionsPending, "Scheduling", "waiting for binding conditions for device on node %s", nodeName)
	err = wait.PollUntilContextTimeout(ctx, bindingPollInterval, pl.binder.timeout, true, func(context.Context) (bool, error) {
		return pl.binder.claimsReadyForBinding(s)
	})
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", ErrBindingTimeout, err)
	}
	if err != nil {
		// The next attempt's Filter sees the failure or timeout and
		// PostFilter deallocates.
		return asError(logger, err)
	}
	s.preBound = true
	return nil
}

// bindClaim records the allocation (if any) and the reservation for
// consumer (the pod or its PodGroup) in the claim, retrying on conflicts
// with a fresh claim. Another pod of a PodGroup may have written both
// already, the allocation its group cycle shared: then there is nothing
// to write.
//
// The members of a pod group are bound concurrently, and each finds the
// group's new claim unwritten; in turn, every member after the first
// finds the first's write in the assume cache and writes nothing, where
// racing each would pay a conflict, a read and a retry.
func (b *binder) bindClaim(ctx context.Context, claim *resourcev1.ResourceClaim, allocation *resourcev1.AllocationResult, consumer resourcev1.ResourceClaimConsumerReference) (*resourcev1.ResourceClaim, error) {
	defer b.writing.Lock(claim.UID)()
	logger := klog.FromContext(ctx)
	client := b.clientset.ResourceV1().ResourceClaims(claim.Namespace)
	c := claim.DeepCopy()
	if consumer.Resource != "pods" {
		// The claim as the last write of any pod of the group left it.
		if cur, err := b.dra.ResourceClaims().Get(c.Namespace, c.Name); err == nil && cur.UID == c.UID {
			c = cur.DeepCopy()
		}
	}
	// stored is the claim as the API server last returned it after a
	// write of this call; c may carry changes that failed.
	var stored *resourcev1.ResourceClaim
	refresh := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if refresh {
			latest, err := client.Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get claim %s after conflict: %w", klog.KObj(c), err)
			}
			c = latest
		}
		refresh = true
		if c.DeletionTimestamp != nil {
			return fmt.Errorf("claim %s got deleted in the meantime", klog.KObj(c))
		}
		if allocation != nil && c.Status.Allocation != nil {
			if !sameDevices(c.Status.Allocation, allocation) {
				return fmt.Errorf("claim %s got allocated elsewhere in the meantime", klog.KObj(c))
			}
			// Written by another pod of the group.
			allocation = nil
		}
		if allocation == nil && c.Status.Allocation != nil && reservedForUID(c, consumer.UID) {
			// Nothing left to write; the caller's claim may predate that.
			return nil
		}
		if allocation != nil {
			// The finalizer goes in with a normal update, before the
			// allocation that it protects.
			if !slices.Contains(c.Finalizers, resourcev1.Finalizer) {
				c.Finalizers = append(c.Finalizers, resourcev1.Finalizer)
				updated, err := client.Update(ctx, c, metav1.UpdateOptions{})
				if err != nil {
					return fmt.Errorf("add finalizer to claim %s: %w", klog.KObj(c), err)
				}
				// c is changed further below; stored stays as returned.
				c, stored = updated.DeepCopy(), updated
			}
			c.Status.Allocation = allocation
		}
		c.Status.ReservedFor = append(c.Status.ReservedFor, consumer)
		if b.conditions {
			if c.Status.Allocation == nil {
				return fmt.Errorf("claim %s got deallocated elsewhere in the meantime", klog.KObj(c))
			}
			if c.Status.Allocation.AllocationTimestamp == nil {
				// A copy: the State shares allocation results between
				// cycles and holds this one as the assumed allocation.
				stamped := c.Status.Allocation.DeepCopy()
				stamped.AllocationTimestamp = &metav1.Time{Time: time.Now()}
				c.Status.Allocation = stamped
			}
		}
		updated, err := client.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		if err != nil {
			err = fmt.Errorf("reserve claim %s for the pod: %w", klog.KObj(c), err)
			if allocation != nil && writeMayHaveLanded(err) {
				return &uncertainWriteError{base: c.ResourceVersion, err: err}
			}
			return err
		}
		c, stored = updated, updated
		return nil
	})
	if stored != nil {
		// Newer than the informer until it catches up.
		if err := b.dra.ResourceClaims().AssumeClaimAfterAPICall(stored); err != nil {
			logger.V(5).Info("Claim not stored in the assume cache", "resourceclaim", klog.KObj(stored), "err", err)
		}
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// sameDevices reports whether two allocations of one claim hand out the
// same devices on the same nodes; their timestamps may differ.
func sameDevices(a, b *resourcev1.AllocationResult) bool {
	return apiequality.Semantic.DeepEqual(a.Devices, b.Devices) && apiequality.Semantic.DeepEqual(a.NodeSelector, b.NodeSelector)
}

func reservedForUID(c *resourcev1.ResourceClaim, uid types.UID) bool {
	for _, r := range c.Status.ReservedFor {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// uncertainWriteError is a failed write of an allocation that the API
// server may nevertheless have stored, based on resource version base.
type uncertainWriteError struct {
	base string
	err  error
}

func (e *uncertainWriteError) Error() string { return e.err.Error() }
func (e *uncertainWriteError) Unwrap() error { return e.err }

// writeMayHaveLanded reports whether a failed write may still be stored.
// The API server refused the request outright for the errors listed; a
// timeout, an internal error (etcd's "request timed out"), a lost
// connection or a cancelled request leave the outcome unknown.
func writeMayHaveLanded(err error) bool {
	switch {
	case apierrors.IsConflict(err), apierrors.IsInvalid(err), apierrors.IsNotFound(err),
		apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsBadRequest(err),
		apierrors.IsTooManyRequests(err), apierrors.IsAlreadyExists(err), apierrors.IsGone(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err):
		return false
	}
	return true
}

func hasBindingConditions(s *cycleState) bool {
	for _, pc := range s.claims {
		if a := pc.claim.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if len(r.BindingConditions) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// claimsReadyForBinding re-reads the pod's claims and reports whether all of
// their binding conditions hold.
func (b *binder) claimsReadyForBinding(s *cycleState) (bool, error) {
	for i, pc := range s.claims {
		c, err := b.dra.ResourceClaims().Get(pc.claim.Namespace, pc.claim.Name)
		if err != nil {
			return false, err
		}
		s.claims[i].claim = c
		ready, err := claimReadyForBinding(c)
		if err != nil {
			return false, err
		}
		if !ready {
			if b.bindingTimedOut(c) {
				return false, fmt.Errorf("%w: claim %s", ErrBindingTimeout, c.Name)
			}
			return false, nil
		}
	}
	return true, nil
}

// claimReadyForBinding reports whether every binding condition of the claim's
// devices is true; an error says that a binding failure condition is.
func claimReadyForBinding(c *resourcev1.ResourceClaim) (bool, error) {
	if c.Status.Allocation == nil {
		return false, nil
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if len(r.BindingConditions) == 0 {
			continue
		}
		ds := deviceStatus(c, &r)
		if ds == nil {
			return false, nil
		}
		for _, cond := range r.BindingFailureConditions {
			if f := apimeta.FindStatusCondition(ds.Conditions, cond); f != nil && f.Status == metav1.ConditionTrue {
				return false, fmt.Errorf("%w: claim %s, device %s: %s: %s", ErrBindingFailed, c.Name, r.Device, f.Reason, f.Message)
			}
		}
		for _, cond := range r.BindingConditions {
			if !apimeta.IsStatusConditionTrue(ds.Conditions, cond) {
				return false, nil
			}
		}
	}
	return true, nil
}

// bindingTimedOut: the claim's devices have binding conditions and were
// allocated longer than the binding timeout ago.
func (b *binder) bindingTimedOut(c *resourcev1.ResourceClaim) bool {
	a := c.Status.Allocation
	if !b.conditions || a == nil || a.AllocationTimestamp == nil {
		return false
	}
	for _, r := range a.Devices.Results {
		if len(r.BindingConditions) > 0 {
			return a.AllocationTimestamp.Add(b.timeout).Before(time.Now())
		}
	}
	return false
}

func deviceStatus(c *resourcev1.ResourceClaim, r *resourcev1.DeviceRequestAllocationResult) *resourcev1.AllocatedDeviceStatus {
	for i := range c.Status.Devices {
		d := &c.Status.Devices[i]
		if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device {
			return d
		}
	}
	return nil
}

// deallocate clears the claim's allocation and reservations.
func (b *binder) deallocate(ctx context.Context, c *resourcev1.ResourceClaim) error {
	c = c.DeepCopy()
	c.Status.ReservedFor = nil
	c.Status.Allocation = nil
	c.Status.Devices = nil
	_, err := b.clientset.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
	return err
}

// unreserve takes consumer uid out of the claim's reservedFor. A strategic
// merge patch removes the entry without needing the latest claim.
func (b *binder) unreserve(ctx context.Context, c *resourcev1.ResourceClaim, uid types.UID) error {
	patch := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"reservedFor":[{"$patch":"delete","uid":%q}]}}`, c.UID, uid)
	_, err := b.clientset.ResourceV1().ResourceClaims(c.Namespace).Patch(ctx, c.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}

// deleteClaim deletes a claim the scheduler created, its finalizer
// removed first (the claim is nobody's once the pod does not use it).
func (b *binder) deleteClaim(ctx context.Context, c *resourcev1.ResourceClaim) error {
	client := b.clientset.ResourceV1().ResourceClaims(c.Namespace)
	refresh := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if refresh {
			latest, err := client.Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c = latest
		}
		refresh = true
		i := slices.Index(c.Finalizers, resourcev1.Finalizer)
		if i < 0 {
			return nil
		}
		c = c.DeepCopy()
		c.Finalizers = slices.Delete(c.Finalizers, i, i+1)
		_, err := client.Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the finalizer of claim %s: %w", klog.KObj(c), err)
	}
	err = client.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete claim %s: %w", klog.KObj(c), err)
	}
	return nil
}
