package schedplugin

import (
	"errors"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/state"
)

// feed applies informer events to the State and keeps the State's assumed
// allocations in step with the framework's claim tracker. Every change to
// claims and assumptions goes through it, under its mutex, so that its
// books (pending, assumed) always match the State.
type feed struct {
	st     *state.State
	logger klog.Logger

	mu sync.Mutex
	// observed are the claims the State holds, as last observed.
	observed map[state.ClaimKey]*resourcev1.ResourceClaim
	// pending are the claims observed without an allocation and not
	// assumed: the only claims another plugin can be allocating.
	pending map[types.UID]*resourcev1.ResourceClaim
	// assumed are the State's assumed allocations.
	assumed map[state.ClaimKey]assumption
	// rejected are observed claims the State refused because their
	// allocation holds a device an observed claim holds too. That happens
	// only while the API is inconsistent (two schedulers allocated one
	// device); they are applied again after every claim change.
	rejected map[state.ClaimKey]*resourcev1.ResourceClaim
}

type assumption struct {
	uid types.UID
	// foreign: made by another plugin (found in the claim tracker).
	foreign bool
	// written is the claim's resource version after this plugin wrote the
	// allocation (PreBind); empty before.
	written string
}

func newFeed(st *state.State, logger klog.Logger) *feed {
	return &feed{
		st: st, logger: logger,
		observed: map[state.ClaimKey]*resourcev1.ResourceClaim{},
		pending:  map[types.UID]*resourcev1.ResourceClaim{},
		assumed:  map[state.ClaimKey]assumption{},
		rejected: map[state.ClaimKey]*resourcev1.ResourceClaim{},
	}
}

// setClaim records a claim as observed.
func (f *feed) setClaim(c *resourcev1.ResourceClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setClaimLocked(c)
	f.retryRejectedLocked()
}

func (f *feed) setClaimLocked(c *resourcev1.ResourceClaim) {
	key := state.KeyOf(c)
	err := f.st.SetClaim(c)
	var conflict *state.ConflictError
	if errors.As(err, &conflict) && conflict.HolderAssumed {
		// The API has the last word: an assumption it contradicts was
		// wrong (its binding failed, or the claim was allocated twice).
		f.logger.V(4).Info("Observed allocation replaces an assumed one", "claim", key, "device", conflict.Device, "assumedFor", conflict.Holder)
		f.forgetLocked(conflict.Holder)
		err = f.st.SetClaim(c)
	}
	if err != nil {
		f.logger.Error(err, "ResourceClaim not applied to the allocation state; retried after the next claim change", "claim", key)
		f.rejected[key] = c
		return
	}
	delete(f.rejected, key)
	if old := f.observed[key]; old != nil && old.UID != c.UID {
		delete(f.pending, old.UID)
	}
	f.observed[key] = c
	if c.Status.Allocation != nil {
		// An observed allocation replaces an assumed one.
		delete(f.assumed, key)
		delete(f.pending, c.UID)
		return
	}
	if _, ok := f.assumed[key]; !ok {
		f.pending[c.UID] = c
	}
}

func (f *feed) deleteClaim(c *resourcev1.ResourceClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := state.KeyOf(c)
	delete(f.pending, c.UID)
	delete(f.assumed, key)
	delete(f.rejected, key)
	delete(f.observed, key)
	if err := f.st.DeleteClaim(c.Namespace, c.Name); err != nil {
		f.logger.V(4).Info("Deleted ResourceClaim was not in the allocation state", "claim", key, "err", err)
	}
	f.retryRejectedLocked()
}

func (f *feed) retryRejectedLocked() {
	for _, c := range f.rejected {
		f.setClaimLocked(c)
	}
}

// observe records c as observed unless the State already has this claim
// (by UID). The plugin reads claims from the claim tracker, whose informer
// handler may run before the feed's; a claim must be known to the State
// before an allocation of it can be assumed.
func (f *feed) observe(c *resourcev1.ResourceClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.observed[state.KeyOf(c)]; old != nil && old.UID == c.UID {
		return
	}
	f.setClaimLocked(c)
}

// assume records an allocation the plugin made in Reserve. c carries it.
func (f *feed) assume(c *resourcev1.ResourceClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.assumeLocked(c, false)
}

func (f *feed) assumeLocked(c *resourcev1.ResourceClaim, foreign bool) error {
	if err := f.st.Assume(c); err != nil {
		return err
	}
	f.assumed[state.KeyOf(c)] = assumption{uid: c.UID, foreign: foreign}
	delete(f.pending, c.UID)
	return nil
}

// written records that PreBind stored the assumed allocation in the
// API, in resource version rv.
func (f *feed) written(key state.ClaimKey, rv string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if as, ok := f.assumed[key]; ok {
		as.written = rv
		f.assumed[key] = as
	}
}

// forget drops an assumed allocation whose binding failed. Forgetting
// what is not assumed (any more) is not an error.
func (f *feed) forget(key state.ClaimKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgetLocked(key)
}

func (f *feed) forgetLocked(key state.ClaimKey) {
	if _, ok := f.assumed[key]; !ok {
		return
	}
	delete(f.assumed, key)
	if err := f.st.Forget(key.Namespace, key.Name); err != nil {
		f.logger.Error(err, "Forgetting an assumed allocation", "claim", key)
		return
	}
	if c := f.observed[key]; c != nil && c.Status.Allocation == nil {
		f.pending[c.UID] = c
	}
}

// sync brings the State's assumptions in line with the claim tracker,
// which every DRA plugin of the scheduler writes to: allocations another
// plugin has in flight are assumed, and assumptions whose allocation
// neither is in flight nor in the API (the binding failed, or the API
// deallocated it before the informer showed the allocation) are dropped. Scheduling cycles run one at a time, so nothing can be put in
// flight while the cycle that called sync runs; bindings may end at any
// time.
func (f *feed) sync(tr fwk.ResourceClaimTracker) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid, c := range f.pending {
		a := tr.GetPendingAllocation(uid)
		if a == nil {
			continue
		}
		in := *c
		in.Status.Allocation = a
		if err := f.assumeLocked(&in, true); err != nil {
			f.logger.Error(err, "Allocation in flight for another plugin cannot be assumed", "claim", state.KeyOf(c))
		}
	}
	for key, as := range f.assumed {
		if tr.GetPendingAllocation(as.uid) != nil {
			continue
		}
		c, err := tr.Get(key.Namespace, key.Name)
		switch {
		case err != nil || c.UID != as.uid:
			// Deleted; the informer will deliver that too.
		case c.Status.Allocation != nil:
			// Written; the informer will deliver it.
			continue
		case as.written != "" && !newerVersion(c.ResourceVersion, as.written):
			// Written by this plugin, and the tracker has not yet seen
			// the write (a failed binding restores its older copy).
			continue
		}
		f.logger.V(5).Info("Assumed allocation neither in flight nor written, dropped", "claim", key, "foreign", as.foreign)
		f.forgetLocked(key)
	}
}

// handlers returns informer handlers that call set and del with objects
// of type T, unwrapping tombstones.
func handlers[T any](set func(T), del func(T)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				set(o)
			}
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(T); ok {
				set(o)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(T); ok {
				del(o)
			}
		},
	}
}
