package allocator

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/dractl/dractl/pkg/core/pool"
)

// NodePools returns the pools whose devices Allocate would consider for the
// node, in the order it visits them: the node's own pools, pools of slices
// that select it (allNodes, nodeSelector) and pools with a device that
// selects it (perDeviceNodeSelection). Incomplete and invalid pools are
// included; Allocate skips or reports them. The error is a node selector
// that cannot be evaluated.
func (a *Allocator) NodePools(node *corev1.Node) ([]pool.ID, error) {
	nps, err := a.gatherPools(node, nil)
	if err != nil {
		return nil, err
	}
	out := make([]pool.ID, len(nps))
	for i, np := range nps {
		out[i] = np.t.p.ID
	}
	return out, nil
}
