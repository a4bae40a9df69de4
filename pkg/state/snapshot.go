package state

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/pool"
)

// Snapshot is the state at one moment. It never changes and is safe for
// concurrent use; everything derived from it is computed once, on first
// use.
type Snapshot struct {
	version uint64
	opts    Options
	cache   *allocator.Cache

	slices  []*api.ResourceSlice        // by name
	classes []*resourcev1.DeviceClass   // by name
	claims  []*resourcev1.ResourceClaim // by namespace/name, assumed allocations filled in
	assumed map[ClaimKey]bool

	poolsOnce sync.Once
	pools     []*pool.Pool
	byID      map[pool.ID]*pool.Pool

	allocOnce [2]sync.Once // per allocator.Strategy
	alloc     [2]*allocator.Allocator
	allocErr  [2]error

	usageMu sync.Mutex
	usage   map[pool.ID]*PoolUsage
}

// Version increases with every delta applied to the State.
func (s *Snapshot) Version() uint64 { return s.version }

// Slices are every ResourceSlice, sorted by name, whatever their
// generation.
func (s *Snapshot) Slices() []*api.ResourceSlice { return s.slices }

// Classes are every DeviceClass, sorted by name.
func (s *Snapshot) Classes() []*resourcev1.DeviceClass { return s.classes }

// Class returns the named DeviceClass.
func (s *Snapshot) Class(name string) (*resourcev1.DeviceClass, bool) {
	i, ok := slices.BinarySearchFunc(s.classes, name, func(c *resourcev1.DeviceClass, n string) int {
		return strings.Compare(c.Name, n)
	})
	if !ok {
		return nil, false
	}
	return s.classes[i], true
}

// Claims are every claim, sorted by namespace and name. A claim with an
// assumed allocation appears with it.
func (s *Snapshot) Claims() []*resourcev1.ResourceClaim { return s.claims }

// Claim returns a claim (with its assumed allocation, if any).
func (s *Snapshot) Claim(key ClaimKey) (*resourcev1.ResourceClaim, bool) {
	i, ok := slices.BinarySearchFunc(s.claims, key, func(c *resourcev1.ResourceClaim, k ClaimKey) int {
		return compareKeys(KeyOf(c), k)
	})
	if !ok {
		return nil, false
	}
	return s.claims[i], true
}

// Assumed reports whether the claim's allocation is an assumed one.
func (s *Snapshot) Assumed(key ClaimKey) bool { return s.assumed[key] }

// Pools are the pools of the snapshot (current generation of each), sorted
// by driver and pool name.
func (s *Snapshot) Pools() []*pool.Pool {
	s.poolsOnce.Do(func() {
		s.pools = pool.Assemble(s.slices)
		s.byID = make(map[pool.ID]*pool.Pool, len(s.pools))
		for _, p := range s.pools {
			s.byID[p.ID] = p
		}
	})
	return s.pools
}

// Pool returns one pool.
func (s *Snapshot) Pool(id pool.ID) (*pool.Pool, bool) {
	s.Pools()
	p, ok := s.byID[id]
	return p, ok
}

// allocated returns the claims whose devices are in use.
func (s *Snapshot) allocated() []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, c := range s.claims {
		if c.Status.Allocation != nil {
			out = append(out, c)
		}
	}
	return out
}

func (s *Snapshot) allocator(strategy allocator.Strategy) (*allocator.Allocator, error) {
	i := int(strategy)
	if i < 0 || i >= len(s.alloc) {
		return nil, fmt.Errorf("unknown allocation strategy %v", strategy)
	}
	s.allocOnce[i].Do(func() {
		s.alloc[i], s.allocErr[i] = allocator.New(allocator.Input{
			Pools:     s.Pools(),
			Classes:   s.classes,
			Allocated: s.allocated(),
		}, allocator.Options{Strategy: strategy, Compiler: s.opts.Compiler, NewShareID: s.opts.NewShareID,
			Features: s.opts.Features, Cache: s.cache})
	})
	return s.alloc[i], s.allocErr[i]
}

// CycleOptions tune one allocation cycle.
type CycleOptions struct {
	Strategy allocator.Strategy
}

// Cycle is the allocation of one pod's pending claims against a snapshot:
// built once per pod, then asked for many nodes.
type Cycle struct {
	snap   *Snapshot
	claims []*resourcev1.ResourceClaim
	opts   CycleOptions
}

// Cycle prepares the allocation of claims, which must not be allocated
// yet. The claims are allocated together, as the claims of one pod.
func (s *Snapshot) Cycle(claims []*resourcev1.ResourceClaim, opts CycleOptions) *Cycle {
	return &Cycle{snap: s, claims: claims, opts: opts}
}

// Allocate allocates the cycle's claims on node. It may be called for many
// nodes concurrently; results and errors are those of
// allocator.Allocator.Allocate.
func (c *Cycle) Allocate(ctx context.Context, node *corev1.Node) ([]*resourcev1.AllocationResult, error) {
	a, err := c.snap.allocator(c.opts.Strategy)
	if err != nil {
		return nil, &allocator.FatalError{Err: err}
	}
	return a.Allocate(ctx, node, c.claims)
}
