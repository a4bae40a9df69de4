package state

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/validation"
)

// Options configure a State. The zero value uses pkg/core/cel, random share
// IDs and every feature gate.
type Options struct {
	// Compiler compiles CEL selectors for every snapshot's allocators. Nil
	// means pkg/core/cel.
	Compiler allocator.SelectorCompiler
	// NewShareID is passed on to the allocators (see allocator.Options).
	NewShareID func() types.UID
	// Features are the DRA feature gates the allocators honour (see
	// allocator.Options). The zero value enables every gate.
	Features features.Set
	// KubeVersion is the Kubernetes minor the allocators answer as (see
	// allocator.Options); the zero value is 1.37's answers.
	KubeVersion validation.KubeVersion
	// MemoizeNodes: a node remembers its answer to a cycle until its pool,
	// the classes or the Node object change, and gives it again to later
	// cycles whose claims have the same specs (see nodeMemo). A scheduler
	// wants this: it asks every node for every pod. Results are then
	// shared between cycles, and callers must not modify them.
	MemoizeNodes bool
}

// DeviceID names one device of one pool.
type DeviceID struct {
	Driver, Pool, Device string
}

func (d DeviceID) String() string { return d.Driver + "/" + d.Pool + "/" + d.Device }

// ClaimKey names a ResourceClaim.
type ClaimKey = types.NamespacedName

// KeyOf returns the key of a claim.
func KeyOf(c *resourcev1.ResourceClaim) ClaimKey {
	return ClaimKey{Namespace: c.Namespace, Name: c.Name}
}

// State is the cluster state allocation depends on. It is safe for
// concurrent use; objects passed to it must not be modified afterwards
// (informer objects are immutable by contract).
//
// Every delta costs in proportion to what it touches: a slice delta
// rebuilds the table of that slice's pool only, a claim delta the overlay
// of what claims hold in the pools its allocation names, and a snapshot
// copies nothing (the indexes are copy-on-write maps, see cowMap). Pool
// tables, with everything learnt about their devices (selector results,
// attribute values, validity per node view), live as long as the pool's
// slices do not change.
type State struct {
	mu sync.Mutex
	*common
	version uint64
	// classGen counts class changes, which may change any answer.
	classGen uint64

	slices  *cowMap[string, *sliceEntry]
	pools   *cowMap[pool.ID, *poolEntry]
	classes *cowMap[string, *resourcev1.DeviceClass]
	claims  *cowMap[ClaimKey, claimEntry]
	// byNode are the pools with a slice naming the node, sorted; shared
	// are the pools with a slice that selects nodes otherwise, sorted.
	// Both are replaced on change, never modified.
	byNode *cowMap[string, []pool.ID]
	shared []pool.ID
	// byNodeGen counts changes of byNode.
	byNodeGen uint64
	// holder is which claim's effective allocation holds each device
	// exclusively (results without a shareID and without admin access).
	holder map[DeviceID]ClaimKey
	// assumedBy are the claims with an assumed allocation, per owner, and
	// onHold those whose assumption has a hold deadline (see Assumption).
	assumedBy map[string]map[ClaimKey]struct{}
	onHold    map[ClaimKey]struct{}
	// taintRules are the DeviceTaintRules in name order (see
	// taintrules.go), replaced on change, never modified; ruleGen counts
	// the changes.
	taintRules []*resourcev1.DeviceTaintRule
	ruleGen    uint64

	stats Stats
	last  *Snapshot
}

// common is what a State and every snapshot of it share, decided once:
// a snapshot points to it rather than copying it, because a scheduler
// takes a snapshot per cycle.
type common struct {
	opts Options
	// protos are allocators over no source, per allocator.Strategy, whose
	// options every snapshot's allocators take.
	protos [2]allocator.Allocator
	memo   memoShared
	// nodeIndex is the node index as a plain map, for snapshots of one
	// generation of it (see Snapshot.poolsOfNode).
	nodeIndex nodeIndexCache
}

// Stats count the work deltas caused, for tests and metrics.
type Stats struct {
	// PoolBuilds counts pools assembled and indexed anew because one of
	// their slices changed.
	PoolBuilds int64
	// HeldUpdates counts pools whose overlay of held devices was replaced
	// because a claim's effective allocation named them.
	HeldUpdates int64
}

// sliceEntry is one ResourceSlice as the State holds it.
type sliceEntry struct {
	s  *pool.Slice
	id pool.ID
	// given is the slice as the caller set it; s has the taint rules'
	// taints too.
	given *api.ResourceSlice
}

// claimEntry is a claim as last observed and the allocation the caller
// assumed for it, if any, with what the State knows of that assumption.
// Its effective allocation is the assumed one if any, else the observed
// one. The claims map holds entries by value: a claim delta then
// allocates no entry of its own. An Assumption is never modified once in
// an entry (snapshots share it): a change replaces it.
type claimEntry struct {
	observed *resourcev1.ResourceClaim
	assumed  *Assumption
}

func (e *claimEntry) effective() *resourcev1.ResourceClaim {
	if e == nil {
		return nil
	}
	if e.assumed != nil {
		return e.assumed.Claim
	}
	return e.observed
}

// poolVersion is what follows from a pool's slices; it is replaced when
// one of them changes.
type poolVersion struct {
	slices []*sliceEntry // every generation, sorted by name
	p      *pool.Pool
	table  *allocator.PoolTable

	invalidOnce sync.Once
	invalid     *pool.InvalidError
}

// validate is the pool's validation, for the read model; computed once.
func (v *poolVersion) validate() *pool.InvalidError {
	v.invalidOnce.Do(func() {
		if v.p.Complete() {
			v.invalid = v.p.Validate()
		}
	})
	return v.invalid
}

// heldResult is one allocation result that names a pool.
type heldResult struct {
	claim   ClaimKey
	r       *resourcev1.DeviceRequestAllocationResult
	assumed bool
}

// poolEntry is one pool at one moment: its slices and what claims hold of
// it. A pool that no slice names has no version but may hold results of
// claims allocated before its slices appeared (or after they went).
type poolEntry struct {
	// ps is the pool's state for the allocator (nil without a version), in
	// state; self is ps as the Source hands it out. Filter reads these
	// first, so they come first.
	ps   *allocator.PoolState
	self [1]*allocator.PoolState
	// slot is the pool's slot, shared by its successive entries; since is
	// the State version from which the entry is current, and prev the
	// entry it replaced, while it is the slot's current one (see
	// poolSlot).
	slot  *poolSlot
	since uint64
	prev  atomic.Pointer[poolEntry]

	id   pool.ID
	ver  *poolVersion
	held []heldResult // by claim ("namespace/name", compareKeys), then result order
	// state and rs (the one held result most pools have) are in the entry,
	// which is allocated anew for every claim delta that names the pool.
	state allocator.PoolState
	rs    [1]*resourcev1.DeviceRequestAllocationResult

	usageOnce sync.Once
	usage     *PoolUsage

	// memo are the answers of nodes that see this pool alone, valid as
	// long as the entry is.
	memo nodeMemo
}

func newPoolEntry(id pool.ID, ver *poolVersion, held []heldResult) *poolEntry {
	e := &poolEntry{id: id, ver: ver, held: held}
	if ver != nil {
		rs := e.rs[:0]
		if len(held) > len(e.rs) {
			rs = make([]*resourcev1.DeviceRequestAllocationResult, 0, len(held))
		}
		for i := range held {
			rs = append(rs, held[i].r)
		}
		ver.table.WithInto(&e.state, rs)
		e.ps = &e.state
		e.self[0] = e.ps
	}
	return e
}

// New returns an empty State. Its snapshots share one selector compiler
// (a new one when opts.Compiler is nil) rather than each building its own.
func New(opts Options) *State {
	if opts.Compiler == nil {
		opts.Compiler = allocator.NewSelectorCompiler()
	}
	cache := allocator.NewCache()
	c := &common{opts: opts}
	for i := range c.protos {
		c.protos[i].Init(nil, allocator.Options{Strategy: allocator.Strategy(i), Compiler: opts.Compiler,
			NewShareID: opts.NewShareID, Features: opts.Features, KubeVersion: opts.KubeVersion, Cache: cache})
	}
	return &State{
		common:  c,
		slices:  newCowMap[string, *sliceEntry](hashString),
		pools:   newCowMap[pool.ID, *poolEntry](hashPool),
		classes: newCowMap[string, *resourcev1.DeviceClass](hashString),
		claims:  newCowMap[ClaimKey, claimEntry](hashClaim),
		byNode:  newCowMap[string, []pool.ID](hashString),
		holder:  map[DeviceID]ClaimKey{},

		assumedBy: map[string]map[ClaimKey]struct{}{},
		onHold:    map[ClaimKey]struct{}{},
	}
}

// Stats returns the work done so far.
func (s *State) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// MemoStats returns how the cycles of every snapshot were answered so far.
func (s *State) MemoStats() MemoStats {
	return MemoStats{Hits: s.memo.hits.Load(), Misses: s.memo.misses.Load()}
}

// NotFoundError reports a delta for an object the State does not hold.
type NotFoundError struct {
	Kind, Name string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s %s: not known to the state", e.Kind, e.Name)
}

// ConflictError reports an allocation that would hold a device another
// claim already holds.
type ConflictError struct {
	Claim  ClaimKey
	Device DeviceID
	Holder ClaimKey
	// HolderAssumed: the other claim's allocation is an assumed one.
	HolderAssumed bool
}

func (e *ConflictError) Error() string {
	how := "allocated to"
	if e.HolderAssumed {
		how = "assumed for"
	}
	return fmt.Sprintf("claim %s: device %s is already %s claim %s", e.Claim, e.Device, how, e.Holder)
}

// SetSlice adds or replaces a resource.k8s.io/v1 ResourceSlice, by name.
// The State reads the object in place (api.FromUpstreamShared): it must not be
// modified afterwards, as informer objects are not.
func (s *State) SetSlice(obj *resourcev1.ResourceSlice) error {
	if obj == nil || obj.Name == "" {
		return fmt.Errorf("ResourceSlice: name is required")
	}
	return s.setSlice(api.FromUpstreamShared(obj), api.UnreadFields(obj.ManagedFields))
}

// SetMixinSlice adds or replaces a ResourceSlice that may use KEP-5234
// mixins, by name. Only the slice's pool is rebuilt (and, when the slice
// moved, the pool it left).
func (s *State) SetMixinSlice(obj *api.ResourceSlice) error {
	return s.setSlice(obj, nil)
}

// setSlice is SetMixinSlice for a slice whose decoder dropped the spec
// fields unread (see api.UnreadFields): its pool is then invalid.
func (s *State) setSlice(obj *api.ResourceSlice, unread []string) error {
	switch {
	case obj == nil || obj.Name == "":
		return fmt.Errorf("ResourceSlice: name is required")
	case obj.Spec.Driver == "":
		return fmt.Errorf("ResourceSlice %s: spec.driver is required", obj.Name)
	case obj.Spec.Pool.Name == "":
		return fmt.Errorf("ResourceSlice %s: spec.pool.name is required", obj.Name)
	}
	// The slice is read outside the lock, where Snapshot need not wait
	// for it; again inside should a rule have changed meanwhile.
	s.mu.Lock()
	rules, gen := s.taintRules, s.ruleGen
	s.mu.Unlock()
	e := newSliceEntry(obj, unread, rules)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ruleGen != gen {
		e = newSliceEntry(obj, unread, s.taintRules)
	}
	old, had := s.slices.get(obj.Name)
	s.slices.set(obj.Name, e)
	if had && old.id != e.id {
		s.replaceSlice(old.id, obj.Name, nil)
	}
	s.replaceSlice(e.id, obj.Name, e)
	s.version++
	return nil
}

// DeleteSlice removes a ResourceSlice.
func (s *State) DeleteSlice(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.slices.get(name)
	if !ok {
		return &NotFoundError{Kind: "ResourceSlice", Name: name}
	}
	s.slices.del(name)
	s.replaceSlice(old.id, name, nil)
	s.version++
	return nil
}

// replaceSlice puts e (nil: nothing) in place of the pool's slice of that
// name and rebuilds the pool.
func (s *State) replaceSlice(id pool.ID, name string, e *sliceEntry) {
	cur, _ := s.pools.get(id)
	var old []*sliceEntry
	var held []heldResult
	var oldVer *poolVersion
	if cur != nil {
		held, oldVer = cur.held, cur.ver
		if oldVer != nil {
			old = oldVer.slices
		}
	}
	i, found := slices.BinarySearchFunc(old, name, func(x *sliceEntry, n string) int { return strings.Compare(x.s.Name, n) })
	sl := make([]*sliceEntry, 0, len(old)+1)
	sl = append(sl, old[:i]...)
	if e != nil {
		sl = append(sl, e)
	}
	if found {
		i++
	}
	sl = append(sl, old[i:]...)
	var ver *poolVersion
	if len(sl) > 0 {
		wrapped := make([]*pool.Slice, len(sl))
		for k, x := range sl {
			wrapped[k] = x.s
		}
		table := allocator.NewPoolTable(pool.Of(wrapped), s.opts.Features)
		// The table's pool is what allocation reads (pool.Resolve), so the
		// read model shows that too.
		ver = &poolVersion{slices: sl, p: table.Pool(), table: table}
		s.stats.PoolBuilds++
	}
	s.reindex(id, oldVer, ver)
	s.setPool(hashPool(id), id, cur, ver, held, false)
}

// setPool replaces the pool's entry cur (nil: none) with one for ver and
// held, or removes it when neither is left, and publishes the change to
// the pool's slot, which the node index hands to Filter. With
// keepAnswers the new entry starts with cur's remembered answers, given
// before Filter can see it.
func (s *State) setPool(h uint64, id pool.ID, cur *poolEntry, ver *poolVersion, held []heldResult, keepAnswers bool) {
	gone := ver == nil && len(held) == 0
	if gone && cur == nil {
		return
	}
	var e *poolEntry
	if gone {
		s.pools.del(id)
		e = &poolEntry{id: id}
	} else {
		e = newPoolEntry(id, ver, held)
		if keepAnswers && cur != nil {
			e.memo.copyFrom(&cur.memo)
		}
		s.pools.put(h, id, e)
	}
	if cur != nil {
		e.slot = cur.slot
	} else {
		e.slot = &poolSlot{id: id}
	}
	// The delta being applied makes the next version.
	e.since = s.version + 1
	e.slot.publish(e)
}

// reindex updates the node index for a pool whose version changed.
func (s *State) reindex(id pool.ID, old, cur *poolVersion) {
	var was, is []string
	var wasShared, isShared bool
	if old != nil {
		was, wasShared = old.table.Nodes(), old.table.SelectsNodes()
	}
	if cur != nil {
		is, isShared = cur.table.Nodes(), cur.table.SelectsNodes()
	}
	for _, n := range was {
		if _, keep := slices.BinarySearch(is, n); !keep {
			ids, _ := s.byNode.get(n)
			s.byNodeGen++
			if ids = without(ids, id); len(ids) == 0 {
				s.byNode.del(n)
			} else {
				s.byNode.set(n, ids)
			}
		}
	}
	for _, n := range is {
		if _, had := slices.BinarySearch(was, n); !had {
			ids, _ := s.byNode.get(n)
			s.byNode.set(n, with(ids, id))
			s.byNodeGen++
		}
	}
	switch {
	case isShared && !wasShared:
		s.shared = with(s.shared, id)
	case wasShared && !isShared:
		s.shared = without(s.shared, id)
	}
}

// with returns a copy of the sorted ids with id added.
func with(ids []pool.ID, id pool.ID) []pool.ID {
	i, found := slices.BinarySearchFunc(ids, id, pool.ID.Compare)
	if found {
		return ids
	}
	return slices.Insert(slices.Clip(ids), i, id)
}

// without returns a copy of the sorted ids without id.
func without(ids []pool.ID, id pool.ID) []pool.ID {
	i, found := slices.BinarySearchFunc(ids, id, pool.ID.Compare)
	if !found {
		return ids
	}
	out := make([]pool.ID, 0, len(ids)-1)
	return append(append(out, ids[:i]...), ids[i+1:]...)
}

// SetClass adds or replaces a DeviceClass.
func (s *State) SetClass(c *resourcev1.DeviceClass) error {
	if c == nil || c.Name == "" {
		return fmt.Errorf("DeviceClass: name is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.classes.set(c.Name, c)
	s.classGen++
	s.version++
	return nil
}

// DeleteClass removes a DeviceClass.
func (s *State) DeleteClass(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.classes.get(name); !ok {
		return &NotFoundError{Kind: "DeviceClass", Name: name}
	}
	s.classes.del(name)
	s.classGen++
	s.version++
	return nil
}

// SetClaim records a claim as observed in the API, allocated or not. An
// observed allocation replaces an assumed one of the same claim (the API
// caught up). It fails, changing nothing, when the allocation would hold a
// device that another claim holds, observed or assumed.
func (s *State) SetClaim(c *resourcev1.ResourceClaim) error {
	if c == nil || c.Name == "" {
		return fmt.Errorf("ResourceClaim: name is required")
	}
	key := KeyOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	h := hashClaim(key)
	cur, had := s.claims.lookup(h, key)
	next := claimEntry{observed: c}
	if cur.assumed != nil && c.Status.Allocation == nil {
		// Binding is still in flight: the assumption stands.
		next.assumed = cur.assumed
	}
	if err := s.checkHeld(key, next.effective()); err != nil {
		return err
	}
	s.replaceClaim(h, key, present(&cur, had), &next)
	s.version++
	return nil
}

// DeleteClaim removes a claim, and with it any assumed allocation.
func (s *State) DeleteClaim(namespace, name string) error {
	key := ClaimKey{Namespace: namespace, Name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.claims.get(key)
	if !ok {
		return &NotFoundError{Kind: "ResourceClaim", Name: key.String()}
	}
	s.replaceClaim(hashClaim(key), key, &cur, nil)
	s.version++
	return nil
}

// exclusive calls f for each device the allocation holds for itself
// alone (results without a shareID and without admin access).
func exclusive(c *resourcev1.ResourceClaim, f func(DeviceID) bool) bool {
	if c == nil || c.Status.Allocation == nil {
		return true
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.ShareID != nil || ptr.Deref(r.AdminAccess, false) {
			continue
		}
		if !f(DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}) {
			return false
		}
	}
	return true
}

func (s *State) checkHeld(key ClaimKey, c *resourcev1.ResourceClaim) error {
	var err error
	exclusive(c, func(d DeviceID) bool {
		if h, ok := s.holder[d]; ok && h != key {
			other, _ := s.claims.get(h)
			err = &ConflictError{Claim: key, Device: d, Holder: h, HolderAssumed: other.assumed != nil}
			return false
		}
		return true
	})
	return err
}

// compareKeys orders claims by "namespace/name", the order holders are
// listed in, without building the strings.
func compareKeys(x, y ClaimKey) int {
	if x.Namespace == y.Namespace {
		return strings.Compare(x.Name, y.Name)
	}
	at := func(k ClaimKey, i int) byte {
		switch {
		case i < len(k.Namespace):
			return k.Namespace[i]
		case i == len(k.Namespace):
			return '/'
		}
		return k.Name[i-len(k.Namespace)-1]
	}
	nx, ny := len(x.Namespace)+1+len(x.Name), len(y.Namespace)+1+len(y.Name)
	for i := range min(nx, ny) {
		if a, b := at(x, i), at(y, i); a != b {
			return cmp.Compare(a, b)
		}
	}
	return cmp.Compare(nx, ny)
}

// present is e when the claim was there (ok), else nil.
func present(e *claimEntry, ok bool) *claimEntry {
	if !ok {
		return nil
	}
	return e
}

// replaceClaim puts the claim's entry after (nil: none) in place of
// before (nil: none). Every change of a claim's entry goes through it, so
// that the claims map, the assumption indexes and what the claim holds
// change together.
func (s *State) replaceClaim(h uint64, key ClaimKey, before, after *claimEntry) {
	if after != nil {
		s.claims.put(h, key, *after)
	} else {
		s.claims.del(key)
	}
	s.reindexAssumption(key, before, after)
	s.moveHolds(key, before, after)
}

// moveHolds replaces what the claim's effective allocation holds (from
// before to after, either nil) in the holder index and in the overlays of
// the pools either names.
func (s *State) moveHolds(key ClaimKey, before, after *claimEntry) {
	was, is := before.effective(), after.effective()
	wasAssumed, isAssumed := before != nil && before.assumed != nil, after != nil && after.assumed != nil
	if was == is && wasAssumed == isAssumed {
		return
	}
	exclusive(was, func(d DeviceID) bool {
		if s.holder[d] == key {
			delete(s.holder, d)
		}
		return true
	})
	exclusive(is, func(d DeviceID) bool {
		s.holder[d] = key
		return true
	})
	var buf [4]pool.ID
	touched := buf[:0]
	for _, c := range []*resourcev1.ResourceClaim{was, is} {
		if c == nil || c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if id := (pool.ID{Driver: r.Driver, Pool: r.Pool}); !slices.Contains(touched, id) {
				touched = append(touched, id)
			}
		}
	}
	for _, id := range touched {
		h := hashPool(id)
		cur, _ := s.pools.lookup(h, id)
		var held []heldResult
		var ver *poolVersion
		if cur != nil {
			held, ver = cur.held, cur.ver
		}
		i := 0
		for i < len(held) && compareKeys(held[i].claim, key) < 0 {
			i++
		}
		j := i
		for j < len(held) && held[j].claim == key {
			j++
		}
		n := 0
		var rs []resourcev1.DeviceRequestAllocationResult
		if is != nil && is.Status.Allocation != nil {
			rs = is.Status.Allocation.Devices.Results
			for k := range rs {
				if rs[k].Driver == id.Driver && rs[k].Pool == id.Pool {
					n++
				}
			}
		}
		next := make([]heldResult, 0, len(held)-(j-i)+n)
		next = append(next, held[:i]...)
		for k := range rs {
			if rs[k].Driver == id.Driver && rs[k].Pool == id.Pool {
				next = append(next, heldResult{claim: key, r: &rs[k], assumed: isAssumed})
			}
		}
		// An allocation written as it was assumed (the usual end of a
		// binding) holds what the assumption held: the nodes' answers
		// stay true, and the cycles that follow need not search again.
		same := cur != nil && sameResults(held[i:j], next[i:i+n])
		next = append(next, held[j:]...)
		s.stats.HeldUpdates++
		s.setPool(h, id, cur, ver, next, same)
	}
}

// sameResults reports whether two claims' results in one pool hold the
// same devices in the same way.
func sameResults(a, b []heldResult) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k].r != b[k].r && !equality.Semantic.DeepEqual(*a[k].r, *b[k].r) {
			return false
		}
	}
	return true
}

// Snapshot returns an immutable view of the current state in O(1). While
// no delta arrives, the same snapshot is returned.
func (s *State) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && s.last.version == s.version {
		return s.last
	}
	s.last = &Snapshot{
		version: s.version, common: s.common, classGen: s.classGen,
		slices: s.slices.freeze(), pools: s.pools.freeze(), classes: s.classes.freeze(),
		claims: s.claims.freeze(), byNode: s.byNode.freeze(), shared: s.shared,
		byNodeGen: s.byNodeGen,
	}
	return s.last
}
