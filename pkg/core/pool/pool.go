// Package pool groups ResourceSlices into resource pools and checks the
// pool-level rules that admission cannot check because they span slices
// (KEP-4815 §"Validation").
package pool

import (
	"cmp"
	"slices"

	"github.com/dractl/dractl/pkg/core/api"
)

// ID identifies a pool: driver plus pool name.
type ID struct {
	Driver string
	Pool   string
}

func (id ID) String() string { return id.Driver + "/" + id.Pool }

// Compare orders IDs by driver, then pool name, the order in which the
// upstream allocator visits pools.
func (id ID) Compare(o ID) int {
	if c := cmp.Compare(id.Driver, o.Driver); c != 0 {
		return c
	}
	return cmp.Compare(id.Pool, o.Pool)
}

// Slice is one ResourceSlice of a pool together with the index of its
// mixins, built once so that device look-ups never rebuild it.
type Slice struct {
	*api.ResourceSlice
	Mixins *api.MixinIndex
	// usesMixins: some KEP-5234 field is set (api.ResourceSlice.UsesMixins),
	// found once per slice so that Resolve passes over other pools
	// without looking at their devices.
	usesMixins bool
	// Unread are the spec fields the API server holds for the slice that
	// the compiled resource.k8s.io/v1 types dropped while decoding it
	// (api.UnreadFields). A pool with such a slice cannot be read
	// completely, and is invalid.
	Unread []string
}

// NewSlice wraps s. s must not be modified afterwards.
func NewSlice(s *api.ResourceSlice) *Slice {
	return &Slice{ResourceSlice: s, Mixins: indexOf(s), usesMixins: s.UsesMixins()}
}

// Pool is the current generation of one resource pool.
type Pool struct {
	ID
	// Generation is the highest generation seen; only slices of this
	// generation count (ResourceSlice API, "pool.generation").
	Generation int64
	// SliceCount is the resourceSliceCount the pool's slices declare. When
	// they disagree, it is the largest and Problems says so.
	SliceCount int64
	// Slices are the slices of Generation, sorted by name.
	Slices []*Slice
	// Obsolete counts the slices of older generations.
	Obsolete int
	// Older are the slices of older generations, sorted by generation
	// (newest first), then name. A node that sees a complete older
	// generation and none of the newest still allocates from the one it
	// sees, as upstream's allocator does.
	Older []*Slice
	// Dropped are the devices and counter sets Resolve left out, each
	// with its slice, field path and reason.
	Dropped []Problem
}

// Generations returns the pool's generations, newest first, each with its
// slices sorted by name and the resourceSliceCount they declare (the
// largest, if they disagree).
func (p *Pool) Generations() []*Pool {
	out := []*Pool{{ID: p.ID, Generation: p.Generation, SliceCount: p.SliceCount, Slices: p.Slices}}
	for i := 0; i < len(p.Older); {
		g := &Pool{ID: p.ID, Generation: p.Older[i].Spec.Pool.Generation}
		j := i
		for j < len(p.Older) && p.Older[j].Spec.Pool.Generation == g.Generation {
			g.SliceCount = max(g.SliceCount, p.Older[j].Spec.Pool.ResourceSliceCount)
			j++
		}
		g.Slices = p.Older[i:j:j]
		out = append(out, g)
		i = j
	}
	return out
}

// Complete reports whether every slice of the pool has been seen. Incomplete
// pools are skipped by the allocator rather than used in part.
func (p *Pool) Complete() bool {
	return int64(len(p.Slices)) == p.SliceCount
}

// Assemble groups slices into pools: by driver and pool name, keeping only
// the highest generation. Pools come sorted by ID. The slices are not
// copied; callers must not modify them afterwards.
func Assemble(in []*api.ResourceSlice) []*Pool {
	// A scheduler assembles the whole cluster per cycle, so this sorts
	// instead of hashing (the output is sorted anyway, and listers usually
	// return slices already in order) and makes one allocation each for
	// all slices, pools and pool slice lists.
	order := make([]int32, len(in))
	for i := range order {
		order[i] = int32(i)
	}
	less := func(x, y int32) int {
		a, b := &in[x].Spec, &in[y].Spec
		if c := cmp.Compare(a.Driver, b.Driver); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Pool.Name, b.Pool.Name); c != 0 {
			return c
		}
		return cmp.Compare(in[x].Name, in[y].Name)
	}
	if !slices.IsSortedFunc(order, less) {
		// Stable: slices of one name keep their input order.
		slices.SortStableFunc(order, less)
	}
	wrapped := make([]Slice, len(in))
	ptrs := make([]*Slice, 0, len(in))
	nPools := 0
	for i := 0; i < len(order); {
		nPools++
		j := i + 1
		for j < len(order) && samePool(in[order[i]], in[order[j]]) {
			j++
		}
		i = j
	}
	pools := make([]Pool, 0, nPools)
	out := make([]*Pool, 0, nPools)
	group := make([]*Slice, 0, 8)
	for i := 0; i < len(order); {
		first := in[order[i]]
		j := i + 1
		for j < len(order) && samePool(first, in[order[j]]) {
			j++
		}
		group = group[:0]
		for _, k := range order[i:j] {
			w := &wrapped[k]
			w.ResourceSlice = in[k]
			w.Mixins = indexOf(in[k])
			w.usesMixins = in[k].UsesMixins()
			group = append(group, w)
		}
		var p Pool
		p, ptrs = of(group, ptrs)
		pools = append(pools, p)
		out = append(out, &pools[len(pools)-1])
		i = j
	}
	return out
}

// Of returns the pool made of the given slices, which must all name the
// same driver and pool and be sorted by name. Like Assemble, it keeps the
// slices of the highest generation in Slices and the others in Older.
func Of(slices []*Slice) *Pool {
	p, _ := of(slices, make([]*Slice, 0, len(slices)))
	return &p
}

// of builds the pool of one group of slices (sorted by name), appending
// its current slices to ptrs, which Assemble shares between pools.
func of(group []*Slice, ptrs []*Slice) (Pool, []*Slice) {
	first := group[0]
	p := Pool{ID: ID{Driver: first.Spec.Driver, Pool: first.Spec.Pool.Name}, Generation: first.Spec.Pool.Generation}
	for _, s := range group[1:] {
		p.Generation = max(p.Generation, s.Spec.Pool.Generation)
	}
	start := len(ptrs)
	for _, s := range group {
		if s.Spec.Pool.Generation < p.Generation {
			p.Obsolete++
			continue
		}
		ptrs = append(ptrs, s)
		p.SliceCount = max(p.SliceCount, s.Spec.Pool.ResourceSliceCount)
	}
	p.Slices = ptrs[start:len(ptrs):len(ptrs)]
	if p.Obsolete > 0 {
		for _, s := range group {
			if s.Spec.Pool.Generation < p.Generation {
				p.Older = append(p.Older, s)
			}
		}
		// Stable: within a generation the name order stays.
		slices.SortStableFunc(p.Older, func(x, y *Slice) int {
			return cmp.Compare(y.Spec.Pool.Generation, x.Spec.Pool.Generation)
		})
	}
	return p, ptrs
}

// indexOf indexes the slice's mixins; slices without any share one empty
// index.
func indexOf(s *api.ResourceSlice) *api.MixinIndex {
	if s.Spec.Mixins == nil {
		return emptyIndex
	}
	return api.NewMixinIndex(&s.Spec)
}

// emptyIndex is what NewMixinIndex returns for a slice without mixins; an
// index is never modified, so all such slices share it.
var emptyIndex = api.NewMixinIndex(&api.ResourceSliceSpec{})

func samePool(x, y *api.ResourceSlice) bool {
	return x.Spec.Driver == y.Spec.Driver && x.Spec.Pool.Name == y.Spec.Pool.Name
}
