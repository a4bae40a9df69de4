// Package pool groups ResourceSlices into resource pools and checks the
// pool-level rules that admission cannot check because they span slices
// (KEP-4815 §"Validation").
package pool

import (
	"cmp"
	"slices"

	"github.com/dractl/dractl/pkg/api"
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
}

// NewSlice wraps s. s must not be modified afterwards.
func NewSlice(s *api.ResourceSlice) *Slice {
	return &Slice{ResourceSlice: s, Mixins: api.NewMixinIndex(&s.Spec)}
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
	for i := 0; i < len(order); {
		first := in[order[i]]
		p := Pool{ID: ID{Driver: first.Spec.Driver, Pool: first.Spec.Pool.Name}, Generation: first.Spec.Pool.Generation}
		j := i + 1
		for j < len(order) && samePool(first, in[order[j]]) {
			p.Generation = max(p.Generation, in[order[j]].Spec.Pool.Generation)
			j++
		}
		start := len(ptrs)
		for _, k := range order[i:j] {
			s := in[k]
			w := &wrapped[k]
			w.ResourceSlice = s
			if s.Spec.Mixins == nil {
				w.Mixins = emptyIndex
			} else {
				w.Mixins = api.NewMixinIndex(&s.Spec)
			}
			if s.Spec.Pool.Generation < p.Generation {
				p.Obsolete++
				continue
			}
			ptrs = append(ptrs, w)
			p.SliceCount = max(p.SliceCount, s.Spec.Pool.ResourceSliceCount)
		}
		p.Slices = ptrs[start:len(ptrs):len(ptrs)]
		if p.Obsolete > 0 {
			for _, k := range order[i:j] {
				if in[k].Spec.Pool.Generation < p.Generation {
					p.Older = append(p.Older, &wrapped[k])
				}
			}
			// Stable: within a generation the name order stays.
			slices.SortStableFunc(p.Older, func(x, y *Slice) int {
				return cmp.Compare(y.Spec.Pool.Generation, x.Spec.Pool.Generation)
			})
		}
		pools = append(pools, p)
		out = append(out, &pools[len(pools)-1])
		i = j
	}
	return out
}

// emptyIndex is what NewMixinIndex returns for a slice without mixins; an
// index is never modified, so all such slices share it.
var emptyIndex = api.NewMixinIndex(&api.ResourceSliceSpec{})

func samePool(x, y *api.ResourceSlice) bool {
	return x.Spec.Driver == y.Spec.Driver && x.Spec.Pool.Name == y.Spec.Pool.Name
}
