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
	for _, s := range in {
		id := ID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name}
		p := byID[id]
		gen := s.Spec.Pool.Generation
		switch {
		case p == nil:
			p = &Pool{ID: id, Generation: gen}
			byID[id] = p
		case gen < p.Generation:
			p.Obsolete++
			continue
		case gen > p.Generation:
			p.Obsolete += len(p.Slices)
			p.Generation, p.Slices, p.SliceCount = gen, nil, 0
		}
		p.Slices = append(p.Slices, NewSlice(s))
		p.SliceCount = max(p.SliceCount, s.Spec.Pool.ResourceSliceCount)
	}
	pools := make([]*Pool, 0, len(byID))
	for _, p := range byID {
		slices.SortStableFunc(p.Slices, func(a, b *Slice) int { return cmp.Compare(a.Name, b.Name) })
		pools = append(pools, p)
	}
	slices.SortFunc(pools, func(a, b *Pool) int { return a.ID.Compare(b.ID) })
	return pools
}
