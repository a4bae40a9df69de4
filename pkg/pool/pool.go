// Package pool groups ResourceSlices into resource pools and checks the
// pool-level rules that admission cannot check because they span slices
// (KEP-4815, seed 001 "Validation").
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
	// generation count (seed 003, "pool.generation").
	Generation int64
	// SliceCount is the resourceSliceCount the pool's slices declare. When
	// they disagree, it is the largest and Problems says so.
	SliceCount int64
	// Slices are the slices of Generation, sorted by name.
	Slices []*Slice
	// Obsolete counts the slices of older generations that were ignored.
	Obsolete int
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
	byID := make(map[ID]*Pool)
	// One allocation each for all slices, pools and empty mixin indexes:
	// a scheduler assembles the whole cluster per cycle, so per-slice
	// allocations are what this costs.
	wrapped := make([]Slice, len(in))
	empty := make([]api.MixinIndex, len(in))
	pools := make([]Pool, 0, len(in))
	for i, s := range in {
		id := ID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name}
		p := byID[id]
		gen := s.Spec.Pool.Generation
		switch {
		case p == nil:
			pools = append(pools, Pool{ID: id, Generation: gen})
			p = &pools[len(pools)-1]
			byID[id] = p
		case gen < p.Generation:
			p.Obsolete++
			continue
		case gen > p.Generation:
			p.Obsolete += len(p.Slices)
			p.Generation, p.Slices, p.SliceCount = gen, nil, 0
		}
		w := &wrapped[i]
		w.ResourceSlice = s
		if s.Spec.Mixins == nil {
			w.Mixins = &empty[i] // what NewMixinIndex returns without mixins
		} else {
			w.Mixins = api.NewMixinIndex(&s.Spec)
		}
		p.Slices = append(p.Slices, w)
		p.SliceCount = max(p.SliceCount, s.Spec.Pool.ResourceSliceCount)
	}
	out := make([]*Pool, len(pools))
	for i := range pools {
		p := &pools[i]
		slices.SortStableFunc(p.Slices, func(a, b *Slice) int { return cmp.Compare(a.Name, b.Name) })
		out[i] = p
	}
	slices.SortFunc(out, func(a, b *Pool) int { return a.ID.Compare(b.ID) })
	return out
}
