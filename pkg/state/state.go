package state

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/features"
)

// Options configure a State. The zero value uses pkg/cel, random share
// IDs and every feature gate.
type Options struct {
	// Compiler compiles CEL selectors for every snapshot's allocators. Nil
	// means pkg/cel.
	Compiler allocator.SelectorCompiler
	// NewShareID is passed on to the allocators (see allocator.Options).
	NewShareID func() types.UID
	// Features are the DRA feature gates the allocators honour (see
	// allocator.Options). The zero value enables every gate.
	Features features.Set
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
type State struct {
	mu      sync.Mutex
	opts    Options
	cache   *allocator.Cache
	version uint64

	slices  map[string]*api.ResourceSlice
	classes map[string]*resourcev1.DeviceClass
	// claims are the claims as last observed; assumed are allocations made
	// by the caller that the API has not reflected yet. A claim's effective
	// allocation is its assumed one if any, else its observed one.
	claims  map[ClaimKey]*resourcev1.ResourceClaim
	assumed map[ClaimKey]*resourcev1.ResourceClaim
	// holder is which claim's effective allocation holds each device
	// exclusively (results without a shareID and without admin access).
	holder map[DeviceID]ClaimKey

	last *Snapshot
}

// New returns an empty State. Its snapshots share one selector compiler
// (a new one when opts.Compiler is nil) rather than each building its own.
func New(opts Options) *State {
	if opts.Compiler == nil {
		opts.Compiler = allocator.NewSelectorCompiler()
	}
	return &State{
		opts:    opts,
		cache:   allocator.NewCache(),
		slices:  map[string]*api.ResourceSlice{},
		classes: map[string]*resourcev1.DeviceClass{},
		claims:  map[ClaimKey]*resourcev1.ResourceClaim{},
		assumed: map[ClaimKey]*resourcev1.ResourceClaim{},
		holder:  map[DeviceID]ClaimKey{},
	}
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
func (s *State) SetSlice(obj *resourcev1.ResourceSlice) error {
	if obj == nil || obj.Name == "" {
		return fmt.Errorf("ResourceSlice: name is required")
	}
	return s.SetMixinSlice(api.FromV1(obj))
}

// SetMixinSlice adds or replaces a ResourceSlice that may use KEP-5234
// mixins, by name.
func (s *State) SetMixinSlice(obj *api.ResourceSlice) error {
	if obj == nil || obj.Name == "" {
		return fmt.Errorf("ResourceSlice: name is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.slices[obj.Name]; old != nil {
		s.cache.Forget(old)
	}
	s.slices[obj.Name] = obj
	s.version++
	return nil
}

// DeleteSlice removes a ResourceSlice.
func (s *State) DeleteSlice(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.slices[name]
	if !ok {
		return &NotFoundError{Kind: "ResourceSlice", Name: name}
	}
	s.cache.Forget(old)
	delete(s.slices, name)
	s.version++
	return nil
}

// SetClass adds or replaces a DeviceClass.
func (s *State) SetClass(c *resourcev1.DeviceClass) error {
	if c == nil || c.Name == "" {
		return fmt.Errorf("DeviceClass: name is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.classes[c.Name] = c
	s.version++
	return nil
}

// DeleteClass removes a DeviceClass.
func (s *State) DeleteClass(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.classes[name]; !ok {
		return &NotFoundError{Kind: "DeviceClass", Name: name}
	}
	delete(s.classes, name)
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
	effective := c
	if a := s.assumed[key]; a != nil && c.Status.Allocation == nil {
		// Binding is still in flight: the assumption stands.
		effective = a
	}
	if err := s.checkHeld(key, effective); err != nil {
		return err
	}
	s.release(key)
	if effective == c {
		delete(s.assumed, key)
	}
	s.claims[key] = c
	s.hold(key, effective)
	s.version++
	return nil
}

// DeleteClaim removes a claim, and with it any assumed allocation.
func (s *State) DeleteClaim(namespace, name string) error {
	key := ClaimKey{Namespace: namespace, Name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.claims[key]; !ok {
		return &NotFoundError{Kind: "ResourceClaim", Name: key.String()}
	}
	s.release(key)
	delete(s.claims, key)
	delete(s.assumed, key)
	s.version++
	return nil
}

// Assume records an allocation the caller made (c carries it in
// status.allocation) before the API reflects it, as a scheduler does
// between Reserve and PreBind. The claim must have been observed without an
// allocation and not be assumed already.
func (s *State) Assume(c *resourcev1.ResourceClaim) error {
	if c == nil || c.Status.Allocation == nil {
		return fmt.Errorf("assume: the claim has no status.allocation")
	}
	key := KeyOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	obs, ok := s.claims[key]
	switch {
	case !ok:
		return &NotFoundError{Kind: "ResourceClaim", Name: key.String()}
	case s.assumed[key] != nil:
		return fmt.Errorf("assume: claim %s already has an assumed allocation", key)
	case obs.Status.Allocation != nil:
		return fmt.Errorf("assume: claim %s is already allocated", key)
	}
	if err := s.checkHeld(key, c); err != nil {
		return err
	}
	s.assumed[key] = c
	s.hold(key, c)
	s.version++
	return nil
}

// Forget drops an assumed allocation, e.g. when binding failed.
func (s *State) Forget(namespace, name string) error {
	key := ClaimKey{Namespace: namespace, Name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.assumed[key] == nil {
		return &NotFoundError{Kind: "assumed allocation of ResourceClaim", Name: key.String()}
	}
	s.release(key)
	delete(s.assumed, key)
	if obs := s.claims[key]; obs != nil {
		s.hold(key, obs)
	}
	s.version++
	return nil
}

// exclusive lists the devices an allocation holds for itself alone.
func exclusive(c *resourcev1.ResourceClaim) []DeviceID {
	if c == nil || c.Status.Allocation == nil {
		return nil
	}
	var out []DeviceID
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.ShareID != nil || ptr.Deref(r.AdminAccess, false) {
			continue
		}
		out = append(out, DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device})
	}
	return out
}

func (s *State) checkHeld(key ClaimKey, c *resourcev1.ResourceClaim) error {
	for _, d := range exclusive(c) {
		if h, ok := s.holder[d]; ok && h != key {
			return &ConflictError{Claim: key, Device: d, Holder: h, HolderAssumed: s.assumed[h] != nil}
		}
	}
	return nil
}

func (s *State) hold(key ClaimKey, c *resourcev1.ResourceClaim) {
	for _, d := range exclusive(c) {
		s.holder[d] = key
	}
}

// release drops what the claim's effective allocation holds.
func (s *State) release(key ClaimKey) {
	c := s.assumed[key]
	if c == nil {
		c = s.claims[key]
	}
	for _, d := range exclusive(c) {
		if s.holder[d] == key {
			delete(s.holder, d)
		}
	}
}

// Snapshot returns an immutable view of the current state. While no delta
// arrives, the same snapshot is returned.
func (s *State) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && s.last.version == s.version {
		return s.last
	}
	snap := &Snapshot{version: s.version, opts: s.opts, cache: s.cache, assumed: map[ClaimKey]bool{}}
	sl := make([]*api.ResourceSlice, 0, len(s.slices))
	for _, x := range s.slices {
		sl = append(sl, x)
	}
	slices.SortFunc(sl, func(x, y *api.ResourceSlice) int { return strings.Compare(x.Name, y.Name) })
	snap.slices = sl
	for _, c := range s.classes {
		snap.classes = append(snap.classes, c)
	}
	slices.SortFunc(snap.classes, func(x, y *resourcev1.DeviceClass) int { return strings.Compare(x.Name, y.Name) })
	for key, c := range s.claims {
		if a := s.assumed[key]; a != nil {
			c = a
			snap.assumed[key] = true
		}
		snap.claims = append(snap.claims, c)
	}
	slices.SortFunc(snap.claims, func(x, y *resourcev1.ResourceClaim) int {
		return compareKeys(KeyOf(x), KeyOf(y))
	})
	s.last = snap
	return snap
}

// compareKeys orders claims by namespace, then name: the order of
// namespace/name strings, without building them (a snapshot sorts every
// claim of the cluster).
func compareKeys(x, y ClaimKey) int {
	if c := strings.Compare(x.Namespace, y.Namespace); c != 0 {
		return c
	}
	return strings.Compare(x.Name, y.Name)
}
