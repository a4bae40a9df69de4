package state

import (
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
