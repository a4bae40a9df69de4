package schedplugin

import (
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
)

// The plugin reuses one kind of memory, gathered here: the per-node
// results map of a cycle. Everything else a cycle needs is the State's and
// the allocator's, which reuse memory by their own rules (pkg/core/state and
// pkg/core/allocator, reuse.go).

// resultMaps hands out the cycles' per-node results maps, reusing the
// ones finished cycles released. Its pool is a sync.Pool, not a list
// under a lock of the plugin's: PreFilter takes maps on the scheduling
// goroutine and PreBind gives them back on binding goroutines, neither
// needs any other state with them, and the pool lets the garbage
// collector take maps no cycle asks for.
type resultMaps struct {
	pool sync.Pool
}

// get returns an empty map for a cycle's results on up to nodes
// nodes: one a finished cycle released, or a new one sized for every node
// Filter may be asked about, since growing it node by node cost more than
// the rest of a remembered node's Filter. Released maps are reused
// because a map for hundreds of nodes is a large allocation, whose fresh
// memory cost more to fault in than a used one costs to clear.
func (r *resultMaps) get(nodes int) map[string][]*resourcev1.AllocationResult {
	if m, ok := r.pool.Get().(map[string][]*resourcev1.AllocationResult); ok {
		return m
	}
	return make(map[string][]*resourcev1.AllocationResult, nodes)
}

// release hands the cycle's results map back for reuse once
// nothing reads it any more: in PreBind, when no Reserve can come again.
// A cycle that ends in Unreserve leaves its map to the garbage collector.
func (r *resultMaps) release(s *cycleState) {
	s.mu.Lock()
	m := s.results
	s.results = nil
	s.mu.Unlock()
	if m != nil {
		clear(m)
		r.pool.Put(m)
	}
}
