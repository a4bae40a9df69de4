package allocator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dractl/dractl/pkg/core/pool"
)

// nodePool is a pool as seen from one node: the generation the node sees
// and, of it, the device slices that target the node, in name order.
type nodePool struct {
	ps           *PoolState
	t            *genTable
	h            *heldGen
	slices       []int32 // device slices targeting the node (not counter slices), indices in t.slices
	incomplete   bool
	invalid      *pool.InvalidError
	bindingConds bool
	devBase      int32 // first attempt-local device index
	ctrBase      int32 // first attempt-local counter index
	setBase      int32 // first attempt-local counter set index
}

// gatherPools selects, into buf, the pools upstream considers for the node and judges
// each as the node sees it (poolView). A slice is relevant when its
// nodeName, allNodes or nodeSelector matches the node, or, with
// perDeviceNodeSelection, when any of its devices does. Only the pools the
// Source lists for the node are looked at, and only they get device
// tables, so the cost does not depend on the number of other nodes. Pools
// come sorted by driver and pool name, pools offering devices with binding
// conditions last.
func (a *Allocator) gatherPools(node *corev1.Node, buf []nodePool) ([]nodePool, error) {
	cands := a.src.NodePools(node.Name)
	out := buf[:0]
	if cap(out) < len(cands) {
		out = make([]nodePool, 0, len(cands))
	}
	for _, ps := range cands {
		if np, ok, known := a.localView(ps, node); known {
			if ok {
				out = append(out, np)
			}
			continue
		}
		gi, vis, err := a.sees(ps, node)
		if err != nil {
			return nil, err
		}
		if gi < 0 {
			continue
		}
		if np, ok := a.poolView(ps, gi, vis); ok {
			out = append(out, np)
		}
	}
	// Stable: pools stay in ID order otherwise.
	slices.SortStableFunc(out, func(x, y nodePool) int {
		switch {
		case x.bindingConds == y.bindingConds:
			return 0
		case x.bindingConds:
			return 1
		}
		return -1
	})
	var dev, ctr, set int32
	for i := range out {
		t := out[i].t
		out[i].devBase, out[i].ctrBase, out[i].setBase = dev, ctr, set
		dev += t.nDevs
		ctr += int32(len(t.capacity))
		set += int32(len(t.sets))
	}
	return out, nil
}

// localView is how the node sees a pool whose slices all name that one
// node (the common case: a node's own devices), decided once per table
// because it follows from the slices alone: which generation, which
// slices, whether the view is complete and valid. known is false for
// other pools, which gatherPools judges per node.
func (a *Allocator) localView(ps *PoolState, node *corev1.Node) (np nodePool, ok, known bool) {
	pt := ps.t
	if pt.only == "" || pt.only != node.Name {
		return nodePool{}, false, false
	}
	pt.localOnce.Do(func() {
		// A slice that names its node never fails node selection.
		gi, vis, err := a.sees(ps, node)
		v := &pt.local
		v.known, v.gi = err == nil, gi
		if err == nil && gi >= 0 {
			v.np, v.ok = a.poolView(ps, gi, vis)
			v.np.ps, v.np.h = nil, nil
		}
	})
	v := &pt.local
	if !v.known {
		return nodePool{}, false, false
	}
	if v.gi < 0 || !v.ok {
		return nodePool{}, false, true
	}
	np = v.np
	np.ps = ps
	np.h = ps.heldOf(v.gi, np.t)
	return np, true, true
}

// sees returns the generation of the pool the node sees (-1 for none)
// and the slices of it that are relevant, in the order upstream finds
// them: the slices that name the node, then those that select it
// otherwise, each by generation (newest first) and name. The newest
// generation among the relevant slices wins. The error is a node selector
// that cannot be evaluated.
func (a *Allocator) sees(ps *PoolState, node *corev1.Node) (int, []int32, error) {
	best := -1
	var vis []int32
	for pass := 0; pass < 2; pass++ {
		for gi, t := range ps.t.gens {
			for k := range t.slices {
				s := &t.slices[k]
				named := s.node.name != ""
				if pass == 0 && (!named || s.node.name != node.Name) {
					continue
				}
				if pass == 1 && (named || !(s.node.set() || s.perDevice)) {
					continue
				}
				ok, err := a.relevant(t, int32(k), node)
				if err != nil {
					return -1, nil, err
				}
				switch {
				case !ok:
				case best < 0 || gi < best:
					best, vis = gi, []int32{int32(k)}
				case gi == best:
					vis = append(vis, int32(k))
				}
			}
		}
	}
	return best, vis, nil
}

// relevant reports whether slice k of the generation targets the node.
func (a *Allocator) relevant(t *genTable, k int32, node *corev1.Node) (bool, error) {
	s := &t.slices[k]
	if !a.g.partitionable && (s.perDeviceSet || s.counters) {
		return false, nil
	}
	if !a.g.compat && t.sliceUsesCompat(k) {
		return false, nil
	}
	switch {
	case s.node.set():
		ok, err := s.node.matches(node)
		if err != nil {
			return false, fmt.Errorf("failed to perform node selection for slice %s: %w", s.s.Name, err)
		}
		return ok, nil
	case s.perDevice:
		t.static()
		for i := s.devStart; i < s.devEnd; i++ {
			d := t.dev(i)
			ok, err := d.node.matches(node)
			if err != nil {
				return false, fmt.Errorf("failed to perform node selection for device %s in slice %s: %w", d.d.Name, s.s.Name, err)
			}
			if ok {
				return true, nil
			}
		}
	}
	return false, nil
}

// poolView judges generation gi of a pool from the slices of it that the
// node sees (vis, in the order they were found), as upstream's allocator
// does:
//   - when the node sees as many slices as the first of them declares, the
//     pool is complete and only those slices count, even if a newer
//     generation exists elsewhere (a multi-host pool moving from node to
//     node; upstream notes this is undesirable but does it);
//   - otherwise a newer generation anywhere makes the pool obsolete for the
//     node (ok is false), and else every slice of the generation decides
//     whether it is complete;
//   - a complete pool is valid when device names are unique among the
//     node's device slices, counter set names among the counter slices
//     used, and every consumed counter resolves (KEP-4815 §"Validation
//     moved from admission to runtime").
//
// validate reports the whole pool instead, as a driver author wants it.
func (a *Allocator) poolView(ps *PoolState, gi int, vis []int32) (np nodePool, ok bool) {
	t, h := ps.gen(gi)
	np = nodePool{ps: ps, t: t, h: h}
	declared := t.slices[vis[0]].s.Spec.Pool.ResourceSliceCount
	viaAll := false
	if int64(len(vis)) != declared {
		if t.newer {
			return np, false
		}
		n := int64(0)
		for k := range t.slices {
			if a.g.compat || !t.sliceUsesCompat(int32(k)) {
				n++
			}
		}
		if n != declared {
			np.incomplete = true
			return np, true
		}
		viaAll = true
	}
	slices.Sort(vis)
	for _, k := range vis {
		if !t.slices[k].counters {
			np.slices = append(np.slices, k)
		}
	}
	np.invalid = t.viewProblems(vis, viaAll)
	if np.invalid == nil {
		// Upstream builds no device list for an invalid pool, so it is
		// never a pool "with binding conditions".
		for _, k := range np.slices {
			if t.bindingConds[k] {
				np.bindingConds = true
			}
		}
	}
	return np, true
}

// viewProblems validates the view of the generation made of the visible
// slices vis (sorted) and, with viaAll, the generation's other slices.
// Results are cached per view: a pool's slices are usually all visible,
// or each node sees the same subset.
func (t *genTable) viewProblems(vis []int32, viaAll bool) *pool.InvalidError {
	if len(vis) == len(t.slices) {
		t.fullOnce.Do(func() { t.fullInvalid = t.validate(vis, false) })
		return t.fullInvalid
	}
	var key strings.Builder
	if viaAll {
		key.WriteString("all:")
	}
	for _, k := range vis {
		key.WriteString(strconv.Itoa(int(k)))
		key.WriteByte(',')
	}
	t.viewMu.Lock()
	defer t.viewMu.Unlock()
	if inv, ok := t.views[key.String()]; ok {
		return inv
	}
	inv := t.validate(vis, viaAll)
	if t.views == nil {
		t.views = map[string]*pool.InvalidError{}
	}
	t.views[key.String()] = inv
	return inv
}

// validate builds the pool.View and checks it. A view of every slice of a
// pool that the table found nothing suspect in is valid without looking
// again.
func (t *genTable) validate(vis []int32, viaAll bool) *pool.InvalidError {
	g := &t.pt.g
	if len(vis) == len(t.slices) && !t.dupNames && !t.badRange && !t.unread && (!g.partitionable || !t.suspect()) {
		return nil
	}
	v := pool.View{ID: t.p.ID, NoCounters: !g.partitionable}
	in := make([]bool, len(t.slices))
	for _, k := range vis {
		in[k] = true
		s := t.slices[k].s
		if t.slices[k].counters {
			v.Counters = append(v.Counters, s)
		} else {
			v.Devices = append(v.Devices, s)
		}
	}
	if viaAll {
		for k := range t.slices {
			if in[k] || (!g.compat && t.sliceUsesCompat(int32(k))) {
				continue
			}
			if t.slices[k].counters {
				v.Counters = append(v.Counters, t.slices[k].s)
			} else {
				v.Others = append(v.Others, t.slices[k].s)
			}
		}
	}
	return v.Validate()
}

// sliceUsesCompat reports whether some device of slice k declares
// compatibility groups; only read with DRADeviceCompatibilityGroups off,
// when such slices are ignored.
func (t *genTable) sliceUsesCompat(k int32) bool {
	for i := range t.slices[k].s.Spec.Devices {
		for _, c := range t.slices[k].s.Spec.Devices[i].ConsumesCounters {
			if len(c.CompatibilityGroups) > 0 {
				return true
			}
		}
	}
	return false
}
