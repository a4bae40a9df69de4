package allocator

import (
	"fmt"
	"slices"
	"sync/atomic"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/pool"
)

// Source is the cluster state an Allocator reads: pools with what
// allocated claims hold of them, and device classes. It must not change
// while the Allocator is in use; an incremental cluster state hands out
// immutable snapshots that implement it.
type Source interface {
	// NodePools returns the pools with a slice that names the node in
	// spec.nodeName (none for the empty name) and the pools with a slice
	// that selects nodes otherwise (PoolTable.SelectsNodes), each once,
	// sorted by pool ID. Returning more pools is allowed, only slower: the
	// Allocator decides which slices the node sees. The tables must have
	// been built with the Allocator's Options.Features.
	NodePools(node string) []*PoolState
	// Class returns the named DeviceClass, nil when there is none.
	Class(name string) *resourcev1.DeviceClass
}

// Allocator allocates claims against one cluster state (a Source). It is
// safe for concurrent use and cheap to build: everything that takes
// looking at devices lives in the pools' tables, which outlive it.
type Allocator struct {
	src Source
	*config
	// nodes, probeNodes: search work of every Allocate call (Stats).
	nodes      atomic.Int64
	probeNodes atomic.Int64
}

// config is what an Allocator decided from its Options. Allocators over
// successive states of one cluster share it (InitLike), which keeps an
// Allocator small enough to build per scheduling cycle.
type config struct {
	opts     Options
	g        gates
	rules    rules
	exprs    *Cache
	strategy strategy
}

// NewForSource returns an Allocator over src. Its cost does not depend on
// the size of the cluster.
func NewForSource(src Source, opts Options) *Allocator {
	a := new(Allocator)
	a.Init(src, opts)
	return a
}

// InitLike is Init with the options of like, an Allocator over another
// state, taken as they are rather than decided again: a cluster state
// that takes a snapshot per scheduling cycle decides them once.
func (a *Allocator) InitLike(src Source, like *Allocator) {
	a.src, a.config = src, like.config
}

// Init makes a, which must be the zero Allocator and not be copied
// afterwards, what NewForSource returns: for a caller that keeps the
// Allocator in an object of its own (a cluster snapshot) and so saves its
// allocation.
func (a *Allocator) Init(src Source, opts Options) {
	a.src, a.config = src, &config{opts: opts, g: newGates(opts.Features), rules: rulesOf(opts.KubeVersion), exprs: opts.Cache, strategy: strategyOf(opts.Strategy)}
	if a.opts.Compiler == nil {
		a.opts.Compiler = defaultCompiler()
	}
	if a.opts.NewShareID == nil {
		a.opts.NewShareID = randomShareID
	}
	if a.exprs == nil {
		a.exprs = NewCache()
	}
}

// New builds an Allocator over a cluster state given whole: a table for
// every pool and an index of slices by node, in time linear in the number
// of slices and allocated results (devices are not looked at until a node
// sees their pool). It fails only on input it cannot index at all (nil
// pool); invalid pools, unknown classes and bad selectors are reported by
// Allocate when they matter, as upstream does. A caller that allocates
// per scheduling cycle keeps the tables instead (pkg/core/state).
func New(in Input, opts Options) (*Allocator, error) {
	pools := slices.Clone(in.Pools)
	for _, p := range pools {
		if p == nil {
			return nil, fmt.Errorf("allocator: nil pool in input")
		}
	}
	slices.SortStableFunc(pools, func(x, y *pool.Pool) int { return x.ID.Compare(y.ID) })
	tables := make([]*PoolTable, len(pools))
	for i, p := range pools {
		tables[i] = NewPoolTable(p, opts.Features)
	}
	return NewForSource(newStaticSource(tables, in.Classes, in.Allocated), opts), nil
}

// newStaticSource pairs tables (sorted by pool ID) with what the
// allocated claims hold and indexes them by node.
func newStaticSource(tables []*PoolTable, classes []*resourcev1.DeviceClass, allocated []*resourcev1.ResourceClaim) *staticSource {
	src := &staticSource{classes: make(map[string]*resourcev1.DeviceClass, len(classes)), byNode: map[string][]*PoolState{}}
	for _, c := range classes {
		if c != nil {
			src.classes[c.Name] = c
		}
	}
	held := map[pool.ID][]*resourcev1.DeviceRequestAllocationResult{}
	for _, c := range allocated {
		if c == nil || c.Status.Allocation == nil {
			continue
		}
		for i := range c.Status.Allocation.Devices.Results {
			r := &c.Status.Allocation.Devices.Results[i]
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := pool.ID{Driver: r.Driver, Pool: r.Pool}
			held[id] = append(held[id], r)
		}
	}
	for _, t := range tables {
		ps := t.With(held[t.p.ID])
		src.all = append(src.all, ps)
		for _, n := range t.nodes {
			src.byNode[n] = append(src.byNode[n], ps)
		}
		if t.selects {
			src.shared = append(src.shared, ps)
		}
	}
	return src
}

// staticSource is the Source of New.
type staticSource struct {
	classes map[string]*resourcev1.DeviceClass
	byNode  map[string][]*PoolState
	shared  []*PoolState
	all     []*PoolState // sorted by ID
}

func (s *staticSource) Class(name string) *resourcev1.DeviceClass { return s.classes[name] }

func (s *staticSource) NodePools(node string) []*PoolState {
	return MergePools(s.byNode[node], s.shared)
}

// MergePools merges two lists of pools sorted by ID into one, each pool
// once. It returns one of them as is when the other is empty.
func MergePools(x, y []*PoolState) []*PoolState {
	switch {
	case len(y) == 0:
		return x
	case len(x) == 0:
		return y
	}
	out := make([]*PoolState, 0, len(x)+len(y))
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch c := x[i].t.p.ID.Compare(y[j].t.p.ID); {
		case x[i] == y[j]:
			out = append(out, x[i])
			i++
			j++
		case c <= 0:
			out = append(out, x[i])
			i++
		default:
			out = append(out, y[j])
			j++
		}
	}
	out = append(out, x[i:]...)
	return append(out, y[j:]...)
}
