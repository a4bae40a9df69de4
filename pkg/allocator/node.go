package allocator

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// nodePool is a pool as seen from one node (seed 001, "Allocation"): the
// slices that target the node, in name order.
type nodePool struct {
	pool         int32
	t            *poolTable
	slices       []int32 // device slices targeting the node (not counter slices)
	incomplete   bool
	invalid      bool
	bindingConds bool
	devBase      int32 // first local device index
	ctrBase      int32 // first local counter index
	setBase      int32 // first local counter set index
}

// gatherPools selects the pools upstream considers for the node. A slice is
// relevant when its nodeName, allNodes or nodeSelector matches the node, or,
// with perDeviceNodeSelection, when any of its devices does. Only slices
// that name the node and the few that select nodes otherwise are looked
// at, and only their pools get device tables, so the cost does not depend
// on the number of other nodes. Pools come sorted by
// driver and pool name, pools offering devices with binding conditions last.
func (a *Allocator) gatherPools(node *corev1.Node) ([]nodePool, error) {
	// A node sees few pools; a linear search beats a map here.
	var out []nodePool
	consider := func(si int32) error {
		s := &a.slices[si]
		relevant := false
		switch {
		case s.node.set():
			ok, err := s.node.matches(node)
			if err != nil {
				return fmt.Errorf("failed to perform node selection for slice %s: %w", s.s.Name, err)
			}
			relevant = ok
		case s.perDevice:
			t := a.table(s.pool)
			for i := s.devStart; i < s.devEnd; i++ {
				d := t.dev(i)
				ok, err := d.node.matches(node)
				if err != nil {
					return fmt.Errorf("failed to perform node selection for device %s in slice %s: %w", d.d.Name, s.s.Name, err)
				}
				if ok {
					relevant = true
					break
				}
			}
		}
		if !relevant {
			return nil
		}
		i := slices.IndexFunc(out, func(np nodePool) bool { return np.pool == s.pool })
		if i < 0 {
			p := &a.pools[s.pool]
			t := a.table(s.pool)
			i = len(out)
			out = append(out, nodePool{pool: s.pool, t: t, incomplete: !p.complete, invalid: p.complete && t.invalid != nil})
		}
		if !s.counters {
			out[i].slices = append(out[i].slices, si)
			if out[i].t.bindingConds[s.local] {
				out[i].bindingConds = true
			}
		}
		return nil
	}
	if err := a.namedSlices(node.Name, consider); err != nil {
		return nil, err
	}
	for _, si := range a.shared {
		if err := consider(si); err != nil {
			return nil, err
		}
	}
	for i := range out {
		slices.Sort(out[i].slices)
		if out[i].incomplete || out[i].invalid {
			// Upstream builds no device list for these pools, so they
			// cannot be "pools with binding conditions".
			out[i].bindingConds = false
		}
	}
	slices.SortFunc(out, func(x, y nodePool) int {
		if x.bindingConds != y.bindingConds {
			if x.bindingConds {
				return 1
			}
			return -1
		}
		return int(x.pool - y.pool)
	})
	var dev, ctr, set int32
	for i := range out {
		t := out[i].t
		out[i].devBase, out[i].ctrBase, out[i].setBase = dev, ctr, set
		dev += int32(len(t.devs))
		ctr += int32(len(t.avail))
		set += int32(len(t.sets))
	}
	return out, nil
}
