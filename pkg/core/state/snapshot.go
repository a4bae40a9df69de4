package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/pool"
)

// Snapshot is the state at one moment. It never changes and is safe for
// concurrent use; everything derived from it is computed once, on first
// use, and what depends only on one pool is shared with later snapshots
// in which the pool did not change.
type Snapshot struct {
	version uint64
	*common
	classGen uint64

	slices  cowView[string, *sliceEntry]
	pools   cowView[pool.ID, *poolEntry]
	classes cowView[string, *resourcev1.DeviceClass]
	claims  cowView[ClaimKey, claimEntry]
	byNode  cowView[string, []pool.ID]
	shared  []pool.ID

	byNodeGen uint64

	// lists are the read model's sorted lists, apart because a scheduler's
	// snapshots never build them.
	lists atomic.Pointer[lists]

	// The allocators, per allocator.Strategy, are part of the snapshot
	// rather than allocated apart: a scheduler takes a snapshot per cycle.
	allocOnce [2]sync.Once
	alloc     [2]allocator.Allocator
	// first is the snapshot's first cycle, allocated with it for the same
	// reason: a scheduler plans one cycle, for one pod, per snapshot.
	firstTaken atomic.Bool
	first      Cycle
}

// lists are a snapshot's sorted lists of objects, each built on first
// request.
type lists struct {
	slicesOnce  sync.Once
	sliceList   []*api.ResourceSlice
	classesOnce sync.Once
	classList   []*resourcev1.DeviceClass
	claimsOnce  sync.Once
	claimList   []*resourcev1.ResourceClaim
	poolsOnce   sync.Once
	poolList    []*pool.Pool
}

func (s *Snapshot) sorted() *lists {
	if l := s.lists.Load(); l != nil {
		return l
	}
	s.lists.CompareAndSwap(nil, new(lists))
	return s.lists.Load()
}

// Version increases with every delta applied to the State.
func (s *Snapshot) Version() uint64 { return s.version }

// Slices are every ResourceSlice, sorted by name, whatever their
// generation.
func (s *Snapshot) Slices() []*api.ResourceSlice {
	l := s.sorted()
	l.slicesOnce.Do(func() {
		l.sliceList = make([]*api.ResourceSlice, 0, s.slices.len())
		s.slices.each(func(_ string, e *sliceEntry) { l.sliceList = append(l.sliceList, e.s.ResourceSlice) })
		slices.SortFunc(l.sliceList, func(x, y *api.ResourceSlice) int { return strings.Compare(x.Name, y.Name) })
	})
	return l.sliceList
}

// Classes are every DeviceClass, sorted by name.
func (s *Snapshot) Classes() []*resourcev1.DeviceClass {
	l := s.sorted()
	l.classesOnce.Do(func() {
		l.classList = make([]*resourcev1.DeviceClass, 0, s.classes.len())
		s.classes.each(func(_ string, c *resourcev1.DeviceClass) { l.classList = append(l.classList, c) })
		slices.SortFunc(l.classList, func(x, y *resourcev1.DeviceClass) int { return strings.Compare(x.Name, y.Name) })
	})
	return l.classList
}

// Class returns the named DeviceClass.
func (s *Snapshot) Class(name string) (*resourcev1.DeviceClass, bool) {
	return s.classes.get(name)
}

// Claims are every claim, sorted by namespace and name. A claim with an
// assumed allocation appears with it.
func (s *Snapshot) Claims() []*resourcev1.ResourceClaim {
	l := s.sorted()
	l.claimsOnce.Do(func() {
		l.claimList = make([]*resourcev1.ResourceClaim, 0, s.claims.len())
		s.claims.each(func(_ ClaimKey, e claimEntry) { l.claimList = append(l.claimList, e.effective()) })
		slices.SortFunc(l.claimList, func(x, y *resourcev1.ResourceClaim) int { return compareKeys(KeyOf(x), KeyOf(y)) })
	})
	return l.claimList
}

// Claim returns a claim (with its assumed allocation, if any).
func (s *Snapshot) Claim(key ClaimKey) (*resourcev1.ResourceClaim, bool) {
	e, ok := s.claims.get(key)
	if !ok {
		return nil, false
	}
	return e.effective(), true
}

// Assumed reports whether the claim's allocation is an assumed one.
func (s *Snapshot) Assumed(key ClaimKey) bool {
	e, ok := s.claims.get(key)
	return ok && e.assumed != nil
}

// Pools are the pools of the snapshot (current generation of each), sorted
// by driver and pool name.
func (s *Snapshot) Pools() []*pool.Pool {
	l := s.sorted()
	l.poolsOnce.Do(func() {
		s.pools.each(func(_ pool.ID, e *poolEntry) {
			if e.ver != nil {
				l.poolList = append(l.poolList, e.ver.p)
			}
		})
		slices.SortFunc(l.poolList, func(x, y *pool.Pool) int { return x.ID.Compare(y.ID) })
	})
	return l.poolList
}

// Pool returns one pool.
func (s *Snapshot) Pool(id pool.ID) (*pool.Pool, bool) {
	e, ok := s.pools.get(id)
	if !ok || e.ver == nil {
		return nil, false
	}
	return e.ver.p, true
}

// source is the Snapshot as the allocator reads it.
type source struct{ s *Snapshot }

func (src source) Class(name string) *resourcev1.DeviceClass {
	c, _ := src.s.classes.get(name)
	return c
}

func (src source) NodePools(node string) []*allocator.PoolState {
	var own nodeSlots
	if node != "" {
		own = src.s.slotsOfNode(node)
	}
	shared := src.s.shared
	if len(shared) == 0 && own.len() == 1 {
		// A node with its own pool only, as most are: no list to build.
		if e := src.s.entry(own.one); e != nil {
			return e.self[:]
		}
		return nil
	}
	out := make([]*allocator.PoolState, 0, own.len()+len(shared))
	add := func(e *poolEntry) {
		if e != nil && e.ps != nil {
			out = append(out, e.ps)
		}
	}
	i, j := 0, 0
	for i < own.len() || j < len(shared) {
		switch {
		case j == len(shared):
			add(src.s.entry(own.at(i)))
			i++
		case i == own.len():
			e, _ := src.s.pools.get(shared[j])
			add(e)
			j++
		default:
			sl := own.at(i)
			switch c := sl.id.Compare(shared[j]); {
			case c < 0:
				add(src.s.entry(sl))
				i++
			case c > 0:
				e, _ := src.s.pools.get(shared[j])
				add(e)
				j++
			default:
				add(src.s.entry(sl))
				i++
				j++
			}
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
		s.alloc[i].InitLike(source{s}, &s.protos[i])
	})
	return &s.alloc[i], nil
}

// CycleOptions tune one allocation cycle.
type CycleOptions struct {
	Strategy allocator.Strategy
	// Timeout bounds each Allocate call's search (0: no bound). A node's
	// remembered answer costs no search and needs no timer.
	Timeout time.Duration
}

// Cycle is the allocation of one pod's pending claims against a snapshot:
// built once per pod, then asked for many nodes.
type Cycle struct {
	plan    allocator.Plan // planned in place: one allocation per cycle
	snap    *Snapshot
	timeout time.Duration
	err     error
	// shape is the memo key of the claims (nil when the snapshot does not
	// remember answers) and names are the claims' names, for
	// explanations.
	shape *shape
	names []string
}

// Cycle plans the allocation of claims, which must not be allocated
// yet: classes are looked up and selectors compiled here, once, so that
// Allocate does only the work that depends on the node. The claims are
// allocated together, as the claims of one pod.
func (s *Snapshot) Cycle(claims []*resourcev1.ResourceClaim, opts CycleOptions) *Cycle {
	c := s.newCycle()
	a, err := s.allocator(opts.Strategy)
	if err != nil {
		c.err = &allocator.FatalError{Err: err}
		return c
	}
	a.PlanInto(&c.plan, claims)
	c.snap, c.timeout = s, opts.Timeout
	if s.opts.MemoizeNodes {
		if key, ok := shapeOf(opts.Strategy, s.classGen, claims); ok {
			c.shape = s.memo.intern(key)
			c.names = make([]string, len(claims))
			for i, cl := range claims {
				c.names[i] = cl.Namespace + "/" + cl.Name
				if cl.Namespace == "" {
					c.names[i] = cl.Name
				}
			}
		}
	}
	return c
}

// Allocate allocates the cycle's claims on node. It may be called for many
// nodes concurrently; results and errors are those of
// allocator.Allocator.Allocate. It looks only at the pools the node may
// see. With Options.MemoizeNodes the results may be shared with other
// cycles: callers must not modify them.
func (c *Cycle) Allocate(ctx context.Context, node *corev1.Node) ([]*resourcev1.AllocationResult, error) {
	if c.err != nil {
		return nil, c.err
	}
	var memo *nodeMemo
	if c.shape != nil && node != nil {
		memo = c.snap.memoOf(node)
	}
	if memo != nil {
		if a := memo.get(c.shape, node); a != nil {
			c.snap.memo.hits.Add(1)
			return a.recall(c.names)
		}
		c.snap.memo.misses.Add(1)
	}
	res, err := c.plan.AllocateWithin(ctx, node, c.timeout)
	if memo != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		memo.remember(c.shape, node, c.names, res, err)
	}
	return res, err
}
