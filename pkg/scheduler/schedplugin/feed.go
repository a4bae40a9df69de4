package schedplugin

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/state"
)

// feed applies claim events to the State and keeps the State's assumed
// allocations in step with the framework's claim tracker. Every change to
// claims and assumptions goes through it, under its mutex, so that what
// it reads of the State and what it writes there follow one another. When
// a change releases devices it tells the waitlist, once the State has it.
//
// The State holds the claims as observed and what is known of each
// assumed allocation (see state.Assumption); the feed keeps only what the
// State cannot: the claims it refused, and the clock.
type feed struct {
	st      *state.State
	waiting *waitlist
	logger  klog.Logger

	// mu guards every field below and orders the State's writes: the
	// informer's handlers, Reserve, Unreserve and PreBind all change
	// claims or assumptions, and each reads the State before writing it.
	// It is not the waitlist's lock: the feed tells the waitlist only
	// after it has let mu go (released), so that Filter, which records
	// rejections on the waitlist, never waits for a claim event; nor is
	// it held across API calls, as binder.writing is.
	mu sync.Mutex
	// foreignClaims returns the claims ("namespace/name") that pods of
	// other scheduling profiles reference: of the pending claims, the only
	// ones another plugin can be allocating. Nil: none.
	foreignClaims func() []string
	// rejected are observed claims the State refused because their
	// allocation holds a device an observed claim holds too. That happens
	// only while the API is inconsistent (two schedulers allocated one
	// device); they are applied again after every claim change.
	rejected map[state.ClaimKey]*resourcev1.ResourceClaim
	// now is the clock that ends holds of writes of unknown outcome.
	now func() time.Time
	// creating are the claims the plugin assumed an allocation for
	// before creating them (assumeNew), by the placeholder UID the
	// assumption carries until the create returns (created).
	creating map[state.ClaimKey]types.UID
	// inTracker are allocations whose write had an unknown outcome and
	// that the plugin left in flight in the framework's claim tracker
	// (keepInFlight), by claim UID, until the claim shows the outcome.
	inTracker map[state.ClaimKey]types.UID
	// tracker is the framework's claim tracker (nil in tests that do not
	// keep allocations in flight).
	tracker fwk.ResourceClaimTracker
	// expired counts an assumption sync dropped (nil: not counted).
	expired func()
}

// Owners of the State's assumed allocations.
const (
	// ownerSelf: made by this plugin, in Reserve. Their end comes through
	// the plugin's own phases and the claim events.
	ownerSelf = Name
	// ownerOther: made by another DRA plugin of the scheduler, found in
	// the claim tracker. No event of this plugin reports their end, so
	// sync looks at them in every cycle.
	ownerOther = "another DRA plugin"
)

// uncertainHold is how long devices stay held for a write whose outcome the
// API server did not report (a timeout, a lost connection) while the claim
// stays at the version the write was based on. The API server abandons a
// request after its request timeout (one minute by default) and etcd
// applies or drops a proposal within seconds of that, so a write not
// visible after twice that time was not stored.
const uncertainHold = 2 * time.Minute

func newFeed(st *state.State, waiting *waitlist, logger klog.Logger) *feed {
	return &feed{
		st: st, waiting: waiting, logger: logger,
		rejected:  map[state.ClaimKey]*resourcev1.ResourceClaim{},
		creating:  map[state.ClaimKey]types.UID{},
		inTracker: map[state.ClaimKey]types.UID{},
		now:       time.Now,
	}
}

// setClaim records a claim as observed. A claim the State refuses is
// applied again after every claim change.
func (f *feed) setClaim(c *resourcev1.ResourceClaim) error {
	f.mu.Lock()
	freed, err := f.setClaimLocked(c)
	freed = f.retryRejectedLocked() || freed
	f.settleLocked()
	f.mu.Unlock()
	f.released(freed)
	return err
}

// setClaimLocked applies an observed claim and reports whether that
// released devices: the claim was deallocated or replaced, or an
// assumption it contradicts was dropped.
func (f *feed) setClaimLocked(c *resourcev1.ResourceClaim) (freed bool, err error) {
	key := state.KeyOf(c)
	if uid, ok := f.creating[key]; ok && c.Status.Allocation == nil {
		if as, ok := f.st.Assumption(key); ok && as.Claim.UID == uid {
			// The informer reports the claim PreBind created before the
			// create returned to PreBind: it is the one assumed for.
			if err := f.st.Created(c); err != nil {
				return false, err
			}
			delete(f.creating, key)
			return false, nil
		}
	}
	if as, ok := f.st.Assumption(key); ok && c.Status.Allocation == nil &&
		(as.Claim.UID != c.UID || as.Written != "" && newerVersion(c.ResourceVersion, as.Written)) {
		// The assumption is of a claim that was replaced, or the claim
		// moved past the allocation's write without it: deallocated since,
		// or a write of unknown outcome that was not stored.
		freed = f.forgetLocked(key)
	}
	old := f.st.Observed(key)
	err = f.st.SetClaim(c)
	var conflict *state.ConflictError
	if errors.As(err, &conflict) && conflict.HolderAssumed {
		// The API has the last word: an assumption it contradicts was
		// wrong (its binding failed, or the claim was allocated twice).
		f.logger.V(4).Info("Observed allocation replaces an assumed one", "claim", key, "device", conflict.Device, "assumedFor", conflict.Holder)
		freed = f.forgetLocked(conflict.Holder) || freed
		err = f.st.SetClaim(c)
	}
	if err != nil {
		f.rejected[key] = c
		return freed, fmt.Errorf("%w (applied again after the next claim change)", err)
	}
	delete(f.rejected, key)
	if old != nil && old.Status.Allocation != nil && (old.UID != c.UID || c.Status.Allocation == nil) {
		freed = true
	}
	return freed, nil
}

// deleteClaim removes a deleted claim, and with it any assumption.
func (f *feed) deleteClaim(c *resourcev1.ResourceClaim) error {
	f.mu.Lock()
	key := state.KeyOf(c)
	_, freed := f.st.Assumption(key)
	if old := f.st.Observed(key); old != nil && old.Status.Allocation != nil {
		freed = true
	}
	delete(f.rejected, key)
	err := f.st.DeleteClaim(c.Namespace, c.Name)
	freed = f.retryRejectedLocked() || freed
	f.mu.Unlock()
	f.released(freed)
	return err
}

// released tells the waitlist that the State released devices. It is
// called without the feed's mutex: the waitlist calls into the queue.
func (f *feed) released(freed bool) {
	if freed {
		f.waiting.roomMade()
	}
}

// retryRejectedLocked applies the rejected claims again and reports
// whether that released devices.
func (f *feed) retryRejectedLocked() (freed bool) {
	for key, c := range f.rejected {
		ok, err := f.setClaimLocked(c)
		if err != nil {
			f.logger.Error(err, "ResourceClaim still not applied to the allocation state", "claim", key)
		}
		freed = ok || freed
	}
	return freed
}

// observe records c as observed unless the State already has this claim
// (by UID). The plugin reads claims from the claim tracker, whose informer
// handler may run before the feed's; a claim must be known to the State
// before an allocation of it can be assumed.
func (f *feed) observe(c *resourcev1.ResourceClaim) {
	f.mu.Lock()
	if old := f.st.Observed(state.KeyOf(c)); old != nil && old.UID == c.UID {
		f.mu.Unlock()
		return
	}
	freed, err := f.setClaimLocked(c)
	f.mu.Unlock()
	if err != nil {
		f.logger.Error(err, "ResourceClaim not applied to the allocation state", "claim", klog.KObj(c))
	}
	f.released(freed)
}

// assume records an allocation the plugin made in Reserve. c carries it.
func (f *feed) assume(c *resourcev1.ResourceClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.AssumeBy(c, ownerSelf)
}

// assumeNew records an allocation the plugin made in Reserve for a claim
// it is yet to create (the extended-resource claim): the claim as it will
// be created, placeholder, is observed first, so that the State can hold
// the allocation (c) under its key.
func (f *feed) assumeNew(placeholder, c *resourcev1.ResourceClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.st.SetClaim(placeholder); err != nil {
		return err
	}
	if err := f.st.AssumeBy(c, ownerSelf); err != nil {
		_ = f.st.DeleteClaim(placeholder.Namespace, placeholder.Name)
		return err
	}
	f.creating[state.KeyOf(c)] = c.UID
	return nil
}

// created carries an assumption made with assumeNew over to the claim as
// the API server created it, so that the claim's events, which carry its
// UID, are matched with it.
func (f *feed) created(c *resourcev1.ResourceClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := state.KeyOf(c)
	if _, ok := f.creating[key]; !ok {
		// The informer delivered the claim first (setClaimLocked).
		return
	}
	delete(f.creating, key)
	if err := f.st.Created(c); err != nil {
		// Not assumed any more: the claim's events overtook PreBind.
		f.logger.V(5).Info("Created claim has no assumed allocation", "claim", klog.KObj(c), "err", err)
	}
}

// dropPlaceholder removes the claim assumeNew recorded, unless a claim
// of that name was observed since.
func (f *feed) dropPlaceholder(key state.ClaimKey, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.creating, key)
	if c := f.st.Observed(key); c != nil && c.UID == uid {
		_ = f.st.DeleteClaim(key.Namespace, key.Name)
	}
}

// share makes sure an allocation that members of a pod group share while
// it is in flight (c carries it) is assumed: it is unless the member that
// made it was unreserved since. One already written is in the State as
// observed, or assumed as written.
func (f *feed) share(c *resourcev1.ResourceClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := state.KeyOf(c)
	if as, ok := f.st.Assumption(key); ok && as.Claim.UID == c.UID {
		return nil
	}
	if o := f.st.Observed(key); o != nil && o.UID == c.UID && o.Status.Allocation != nil {
		return nil
	}
	return f.st.AssumeBy(c, ownerSelf)
}

// written records that PreBind stored the assumed allocation in the
// API, in resource version rv.
func (f *feed) written(key state.ClaimKey, rv string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Not assumed (any more): the claim's events overtook PreBind.
	_ = f.st.SetWritten(key.Namespace, key.Name, rv)
}

// mayBeWritten records that PreBind's write of the assumed allocation
// failed without the API server saying whether it stored it: the write,
// based on resource version base, may still be committed. The devices stay
// held until the claim moves past base (the informer then shows what was
// stored) or uncertainHold passes; dropping them at once would let the
// next claim take devices the late write gives this one.
func (f *feed) mayBeWritten(key state.ClaimKey, base string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Not assumed (any more): the claim's events overtook PreBind.
	_ = f.st.SetMaybeWritten(key.Namespace, key.Name, base, f.now().Add(uncertainHold))
}

// writeUnknown reports whether PreBind's write of the claim's assumed
// allocation ended without the API server saying whether it stored it
// (mayBeWritten), and the claim has not shown the outcome yet.
func (f *feed) writeUnknown(key state.ClaimKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeUnknownLocked(key)
}

func (f *feed) writeUnknownLocked(key state.ClaimKey) bool {
	as, ok := f.st.Assumption(key)
	if !ok || as.HoldUntil.IsZero() || !f.now().Before(as.HoldUntil) {
		return false
	}
	c := f.st.Observed(key)
	return c == nil || !newerVersion(c.ResourceVersion, as.Written)
}

// keepInFlight reports whether the allocation of claim uid, whose binding
// failed, must stay in flight in the framework's claim tracker: its
// write's outcome is unknown, so it may be stored. Taken out of flight,
// the devices would look free to the scheduler's other DRA plugins (the
// in-tree plugin of another profile) until the informer shows the claim,
// while this plugin's State holds them (mayBeWritten). The feed takes it
// out once the claim shows the outcome or the hold ends (settleLocked).
func (f *feed) keepInFlight(key state.ClaimKey, uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tracker == nil || !f.writeUnknownLocked(key) {
		return false
	}
	f.inTracker[key] = uid
	return true
}

// settleLocked takes out of the tracker's flight the allocations kept
// there whose write's outcome is known now.
func (f *feed) settleLocked() {
	for key, uid := range f.inTracker {
		if f.writeUnknownLocked(key) {
			continue
		}
		delete(f.inTracker, key)
		if f.tracker.MaybeRemoveClaimPendingAllocation(uid, true) {
			f.tracker.AssumedClaimRestore(key.Namespace, key.Name)
		}
	}
}

// forgetUnwritten drops an assumed allocation whose binding failed and
// that is not in flight any more, unless a PreBind has written it or may have (mayBeWritten): the
// devices are held until the claim shows the write. Forgetting what is
// not assumed (any more) is not an error.
func (f *feed) forgetUnwritten(key state.ClaimKey) {
	f.mu.Lock()
	freed := false
	if as, ok := f.st.Assumption(key); ok && as.Written == "" {
		freed = f.forgetLocked(key)
	}
	f.mu.Unlock()
	f.released(freed)
}

// forgetLocked drops an assumption and reports whether there was one.
func (f *feed) forgetLocked(key state.ClaimKey) bool {
	return f.st.Forget(key.Namespace, key.Name) == nil
}

// sync brings the State's assumptions in line with the claim tracker,
// which every DRA plugin of the scheduler writes to: allocations another
// plugin has in flight (or has written, before the informer delivers the
// claim) are assumed, and the assumptions whose end no event of this
// plugin reports (another plugin's, and this plugin's writes of unknown
// outcome) are dropped when their allocation neither is in flight nor in
// the API (the binding failed, or the API deallocated it before the
// informer showed the allocation). This plugin's other assumptions end
// through its own phases and the claim events, so a cycle costs nothing
// per pod in flight. Only claims that pods of other profiles reference
// are looked at for allocations of other plugins. Scheduling cycles run
// one at a time, so nothing can be put in flight while the cycle that
// called sync runs; bindings may end at any time.
func (f *feed) sync(tr fwk.ResourceClaimTracker) {
	var foreign []string
	if f.foreignClaims != nil {
		foreign = f.foreignClaims()
	}
	freed := false
	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		f.released(freed)
	}()
	// A hold may have ended with no claim event.
	f.settleLocked()
	for _, k := range foreign {
		ns, name, err := cache.SplitMetaNamespaceKey(k)
		if err != nil {
			continue
		}
		key := state.ClaimKey{Namespace: ns, Name: name}
		c := f.st.Observed(key)
		if c == nil || c.Status.Allocation != nil {
			continue
		}
		if _, assumed := f.st.Assumption(key); assumed {
			continue
		}
		a := tr.GetPendingAllocation(c.UID)
		if a == nil {
			// Another plugin's binding may have ended: its write is in
			// the tracker's assume cache before the informer delivers it
			// to the feed, and the devices are taken from then on.
			if cur, err := tr.Get(c.Namespace, c.Name); err == nil && cur.UID == c.UID && cur.Status.Allocation != nil {
				a = cur.Status.Allocation
			}
		}
		if a == nil {
			continue
		}
		in := *c
		in.Status.Allocation = a
		if err := f.st.AssumeBy(&in, ownerOther); err != nil {
			f.logger.Error(err, "Allocation in flight for another plugin cannot be assumed", "claim", key)
		}
	}
	// A claim in both lists (this plugin wrote for a claim it once saw
	// in flight elsewhere) is looked at twice, which changes nothing: the
	// second look finds it dropped, or kept for the same reason.
	for _, key := range append(f.st.AssumedBy(ownerOther), f.st.OnHold()...) {
		as, ok := f.st.Assumption(key)
		if !ok || tr.GetPendingAllocation(as.Claim.UID) != nil {
			continue
		}
		c, err := tr.Get(key.Namespace, key.Name)
		switch {
		case err != nil || c.UID != as.Claim.UID:
			// Deleted; the informer will deliver that too.
		case c.Status.Allocation != nil:
			// Written; the informer will deliver it.
			continue
		case as.Written != "" && !newerVersion(c.ResourceVersion, as.Written) &&
			(as.HoldUntil.IsZero() || f.now().Before(as.HoldUntil)):
			// Written by this plugin (or maybe written), and the tracker
			// has not yet seen the write (a failed binding restores its
			// older copy).
			continue
		}
		f.logger.V(5).Info("Assumed allocation neither in flight nor written, dropped", "claim", key, "owner", as.Owner)
		if f.forgetLocked(key) {
			freed = true
			if f.expired != nil {
				f.expired()
			}
		}
	}
}

// newerVersion reports whether resource version a is newer than b. The
// API server's versions are integers (the assume cache compares them the
// same way); anything else counts as not newer.
func newerVersion(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// indexForeignClaims indexes the scheduler's pods by the claims that pods
// of other profiles reference, which another DRA plugin of the scheduler
// may be allocating (see sync), and hands the feed the index as
// foreignClaims. The informer updates its index before it notifies the
// scheduling queue, so a pod is indexed before another profile can
// schedule it. Pods of every phase but the terminal ones, which the
// scheduler does not watch, stay indexed: a bound pod's claim may reach
// the State after the pod's binding does.
func (f *feed) indexForeignClaims(pods cache.SharedIndexInformer, profile string) error {
	name := Name + "/claims-of-pods-not-in-" + profile
	err := pods.AddIndexers(cache.Indexers{name: func(obj any) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.SchedulerName == profile {
			return nil, nil
		}
		return claimKeys(pod), nil
	}})
	if err != nil {
		return fmt.Errorf("index pods by claim: %w", err)
	}
	indexer := pods.GetIndexer()
	f.foreignClaims = func() []string { return indexer.ListIndexFuncValues(name) }
	return nil
}
