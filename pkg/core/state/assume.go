package state

import (
	"fmt"
	"maps"
	"slices"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
)

// Assumption is what the State knows of an allocation its caller assumed
// before the API shows it: the claim that carries it, who made it and what
// became of the caller's write of it. The State keeps it with the assumed
// allocation and drops it with it (Forget, an observed allocation, the
// claim's deletion). It acts on none of it: no clock runs in the State,
// and a caller that holds devices until a deadline ends the hold itself
// (Forget).
//
// A scheduler needs this to tell, when the claim is observed again,
// whether the API has moved past its write: a claim observed in a newer
// version than Written and without an allocation was deallocated since,
// or the write was not stored.
type Assumption struct {
	// Claim is the claim with the assumed allocation, as passed to Assume.
	Claim *resourcev1.ResourceClaim
	// Owner names who made the allocation (AssumeBy); Assume's is empty.
	// The State only indexes by it (AssumedBy).
	Owner string
	// Written is the claim's resource version in which the caller's write
	// of the allocation was stored (SetWritten) or, after a write whose
	// outcome the API server did not report, the version that write was
	// based on (SetMaybeWritten). Empty before either.
	Written string
	// HoldUntil is set with SetMaybeWritten: until when the caller keeps
	// the devices held while the claim does not move past Written.
	HoldUntil time.Time
}

// Assume records an allocation the caller made (c carries it in
// status.allocation) before the API reflects it, as a scheduler does
// between Reserve and PreBind. The claim must have been observed without an
// allocation and not be assumed already. It is AssumeBy with no owner.
func (s *State) Assume(c *resourcev1.ResourceClaim) error {
	return s.AssumeBy(c, "")
}

// AssumeBy is Assume for an allocation that owner made: one State may
// hold the allocations of several makers (a scheduler's own, and those it
// learns another scheduler has in flight), which AssumedBy lists apart.
func (s *State) AssumeBy(c *resourcev1.ResourceClaim, owner string) error {
	if c == nil || c.Status.Allocation == nil {
		return fmt.Errorf("assume: the claim has no status.allocation")
	}
	key := KeyOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	h := hashClaim(key)
	cur, ok := s.claims.lookup(h, key)
	switch {
	case !ok:
		return &NotFoundError{Kind: "ResourceClaim", Name: key.String()}
	case cur.assumed != nil:
		return fmt.Errorf("assume: claim %s already has an assumed allocation", key)
	case cur.observed.Status.Allocation != nil:
		return fmt.Errorf("assume: claim %s is already allocated", key)
	}
	if err := s.checkHeld(key, c); err != nil {
		return err
	}
	next := claimEntry{observed: cur.observed, assumed: &Assumption{Claim: c, Owner: owner}}
	s.replaceClaim(h, key, &cur, &next)
	s.version++
	return nil
}

// Created carries a claim's assumed allocation over to the claim the
// caller created under the same name: c, as the API server returned it
// (its UID and resource version), without an allocation. A scheduler that
// creates a claim itself (kube-scheduler's extended-resource claims,
// KEP-5004) allocates for it and assumes that allocation before the
// claim exists, under a claim it recorded with SetClaim; only the create
// tells it what the API server made of the claim. c becomes the observed
// claim; the assumption, what it holds and what is known of it stay.
func (s *State) Created(c *resourcev1.ResourceClaim) error {
	if c == nil || c.Status.Allocation != nil {
		return fmt.Errorf("created: the claim must be given as created, without status.allocation")
	}
	return s.replaceAssumed(KeyOf(c), true, func(cur claimEntry) claimEntry {
		a := *cur.assumed
		assumed := *c
		assumed.Status.Allocation = cur.assumed.Claim.Status.Allocation
		a.Claim = &assumed
		return claimEntry{observed: c, assumed: &a}
	})
}

// Forget drops an assumed allocation, e.g. when binding failed.
func (s *State) Forget(namespace, name string) error {
	return s.replaceAssumed(ClaimKey{Namespace: namespace, Name: name}, true, func(cur claimEntry) claimEntry {
		return claimEntry{observed: cur.observed}
	})
}

// SetWritten records that the caller's write of the claim's assumed
// allocation was stored, in resource version version. The allocation
// stays assumed until the claim is observed with it.
func (s *State) SetWritten(namespace, name, version string) error {
	return s.updateAssumption(ClaimKey{Namespace: namespace, Name: name}, func(a *Assumption) {
		a.Written = version
	})
}

// SetMaybeWritten records that the caller's write of the claim's assumed
// allocation, based on resource version base, failed without the API
// server saying whether it stored it, and that the caller holds the
// devices until holdUntil unless the claim moves past base first.
func (s *State) SetMaybeWritten(namespace, name, base string, holdUntil time.Time) error {
	return s.updateAssumption(ClaimKey{Namespace: namespace, Name: name}, func(a *Assumption) {
		a.Written, a.HoldUntil = base, holdUntil
	})
}

// updateAssumption replaces the claim's assumption with a changed copy.
// What the claim holds does not change, so neither does the version: no
// snapshot answers differently.
func (s *State) updateAssumption(key ClaimKey, change func(*Assumption)) error {
	return s.replaceAssumed(key, false, func(cur claimEntry) claimEntry {
		a := *cur.assumed
		change(&a)
		return claimEntry{observed: cur.observed, assumed: &a}
	})
}

// replaceAssumed replaces the entry of a claim that holds an assumption
// with next(entry); changed says whether what the claim holds may have
// changed, which makes a new version.
func (s *State) replaceAssumed(key ClaimKey, changed bool, next func(claimEntry) claimEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := hashClaim(key)
	cur, _ := s.claims.lookup(h, key)
	if cur.assumed == nil {
		return notAssumed(key)
	}
	n := next(cur)
	s.replaceClaim(h, key, &cur, &n)
	if changed {
		s.version++
	}
	return nil
}

func notAssumed(key ClaimKey) error {
	return &NotFoundError{Kind: "assumed allocation of ResourceClaim", Name: key.String()}
}

// Observed returns the claim as last observed (SetClaim), without any
// assumed allocation; nil when the State does not hold it.
func (s *State) Observed(key ClaimKey) *resourcev1.ResourceClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, _ := s.claims.get(key)
	return e.observed
}

// Assumption returns what the State knows of the claim's assumed
// allocation, if it has one.
func (s *State) Assumption(key ClaimKey) (Assumption, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, _ := s.claims.get(key)
	if e.assumed == nil {
		return Assumption{}, false
	}
	return *e.assumed, true
}

// AssumedBy lists the claims whose assumed allocation owner made, sorted.
// It costs what it returns: a scheduler that looks at another scheduler's
// allocations every cycle does not pay for its own.
func (s *State) AssumedBy(owner string) []ClaimKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.assumedBy[owner])
}

// NumAssumed is how many claims have an assumed allocation.
func (s *State) NumAssumed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, owned := range s.assumedBy {
		n += len(owned)
	}
	return n
}

// OnHold lists the claims whose assumed allocation is held until a
// deadline (SetMaybeWritten), sorted.
func (s *State) OnHold() []ClaimKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.onHold)
}

func sortedKeys(set map[ClaimKey]struct{}) []ClaimKey {
	if len(set) == 0 {
		return nil
	}
	return slices.SortedFunc(maps.Keys(set), compareKeys)
}

// reindexAssumption moves the claim in the assumption indexes from the
// assumption of before to that of after (either entry may be nil).
func (s *State) reindexAssumption(key ClaimKey, before, after *claimEntry) {
	var was, is *Assumption
	if before != nil {
		was = before.assumed
	}
	if after != nil {
		is = after.assumed
	}
	if was == is {
		return
	}
	if was != nil {
		// An owner's set stays when it empties: owners are few, and a
		// scheduler's own set empties and fills again all the time.
		delete(s.assumedBy[was.Owner], key)
		delete(s.onHold, key)
	}
	if is != nil {
		owned := s.assumedBy[is.Owner]
		if owned == nil {
			owned = map[ClaimKey]struct{}{}
			s.assumedBy[is.Owner] = owned
		}
		owned[key] = struct{}{}
		if !is.HoldUntil.IsZero() {
			s.onHold[key] = struct{}{}
		}
	}
}
