package state

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/pool"
)

// NodePools returns the pools whose devices an allocation on node may use,
// as the allocator selects them (slice nodeName, allNodes, nodeSelector,
// per-device node selection). Describing a node and partitioning a cluster
// into nodes that share no pool both start here.
func (s *Snapshot) NodePools(node *corev1.Node) ([]pool.ID, error) {
	a, err := s.allocator(allocator.FirstFit)
	if err != nil {
		return nil, err
	}
	return a.NodePools(node)
}

// poolSlot is where Filter finds a pool's entry from the node index,
// without a lookup in the pools map. Filter on a cluster of many nodes
// visits a node whose data has left the CPU caches since its last visit,
// so each memory access on the way costs a miss: the map lookup by pool
// ID (its hash reads the pool name, then the bucket's entries) would cost
// several, the slot one.
//
// A slot belongs to one pool for as long as the pool has an entry; every
// entry the pool gets is published to it. It holds the current entry and
// that entry the one before (poolEntry.prev), each with the State version
// from which it is current: a snapshot takes the current entry when it is
// not newer than the snapshot, else the one before, and else (two changes
// of the pool since the snapshot) looks in its own pools map. So
// snapshots stay immutable, and the slot keeps only two entries alive.
type poolSlot struct {
	id  pool.ID
	cur atomic.Pointer[poolEntry]
}

// publish makes e the pool's current entry. Only the State's writer
// calls it.
func (sl *poolSlot) publish(e *poolEntry) {
	old := sl.cur.Load()
	e.prev.Store(old)
	if old != nil {
		// Older entries stay reachable from the pools maps of the
		// snapshots that hold them, not from here.
		old.prev.Store(nil)
	}
	sl.cur.Store(e)
}

// entry returns the pool's entry in the snapshot, nil when it has none
// with a pool state.
func (s *Snapshot) entry(sl *poolSlot) *poolEntry {
	e := sl.cur.Load()
	if e.since > s.version {
		if e = e.prev.Load(); e == nil || e.since > s.version {
			e = nil
		}
	}
	if e == nil || e.ps == nil {
		// Changed twice since the snapshot, or gone: the map knows.
		e, _ = s.pools.get(sl.id)
	}
	if e == nil || e.ps == nil {
		return nil
	}
	return e
}

// nodeSlots are the slots of the pools with a slice naming one node,
// sorted by pool ID: the one pool most nodes have, or all of them.
type nodeSlots struct {
	one *poolSlot
	all []*poolSlot
}

func (n nodeSlots) len() int {
	if n.one != nil {
		return 1
	}
	return len(n.all)
}

func (n nodeSlots) at(i int) *poolSlot {
	if n.one != nil {
		return n.one
	}
	return n.all[i]
}

// nodeIndexCache holds the State's node index (which pools name each
// node) as a plain map to their slots, for one generation of it. Every
// Filter call asks it for one node, and the index changes only when
// slices start or stop naming a node, while the copy-on-write map that
// snapshots share costs a hash-trie walk per lookup, and then one per
// pool.
type nodeIndexCache struct {
	cur atomic.Pointer[nodeIndex]
	mu  sync.Mutex // held while building
}

type nodeIndex struct {
	gen uint64
	m   map[string]nodeSlots
}

// slotsOfNode returns the slots of the pools with a slice naming the node.
func (s *Snapshot) slotsOfNode(node string) nodeSlots {
	if ix := s.nodeIndex.cur.Load(); ix != nil && ix.gen == s.byNodeGen {
		return ix.m[node]
	}
	if ix := s.nodeIndex.build(s); ix != nil {
		return ix.m[node]
	}
	ids, _ := s.byNode.get(node)
	return s.slotsOf(ids)
}

// slotsOf returns the slots of the pools, which the snapshot's node index
// names.
func (s *Snapshot) slotsOf(ids []pool.ID) nodeSlots {
	all := make([]*poolSlot, 0, len(ids))
	for _, id := range ids {
		if e, ok := s.pools.get(id); ok {
			all = append(all, e.slot)
		}
	}
	if len(all) == 1 {
		return nodeSlots{one: all[0]}
	}
	return nodeSlots{all: all}
}

// build makes the plain index of the snapshot's generation, unless a newer
// one is cached (an older snapshot must not evict it), and returns it
// (nil: the snapshot is older).
func (c *nodeIndexCache) build(s *Snapshot) *nodeIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	ix := c.cur.Load()
	switch {
	case ix != nil && ix.gen == s.byNodeGen:
		return ix
	case ix != nil && ix.gen > s.byNodeGen:
		return nil
	}
	ix = &nodeIndex{gen: s.byNodeGen, m: make(map[string]nodeSlots, s.byNode.len())}
	s.byNode.each(func(n string, ids []pool.ID) { ix.m[n] = s.slotsOf(ids) })
	c.cur.Store(ix)
	return ix
}
