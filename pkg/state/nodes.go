package state

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/dractl/dractl/pkg/allocator"
	"github.com/dractl/dractl/pkg/pool"
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

// nodeIndexCache holds the State's node index (which pools name each
// node) as a plain map for one generation of it. Every Filter call asks
// it for one node, and the index changes only when slices start or stop
// naming a node, while the copy-on-write map that snapshots share costs a
// hash-trie walk per lookup.
type nodeIndexCache struct {
	cur atomic.Pointer[nodeIndex]
	mu  sync.Mutex // held while building
}

type nodeIndex struct {
	gen uint64
	m   map[string][]pool.ID
}

// poolsOfNode returns the pools with a slice naming the node, sorted.
func (s *Snapshot) poolsOfNode(node string) []pool.ID {
	if ix := s.nodeIndex.cur.Load(); ix != nil && ix.gen == s.byNodeGen {
		return ix.m[node]
	}
	if ix := s.nodeIndex.build(s); ix != nil {
		return ix.m[node]
	}
	ids, _ := s.byNode.get(node)
	return ids
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
	ix = &nodeIndex{gen: s.byNodeGen, m: make(map[string][]pool.ID, s.byNode.len())}
	s.byNode.each(func(n string, ids []pool.ID) { ix.m[n] = ids })
	c.cur.Store(ix)
	return ix
}
