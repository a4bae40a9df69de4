package allocator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dractl/dractl/pkg/pool"
)

// nodePool is a pool as seen from one node: the generation the node sees
// and, of it, the device slices that target the node, in name order.
type nodePool struct {
	pool         int32 // index in Allocator.pools: one generation of a pool
	t            *poolTable
	slices       []int32 // device slices targeting the node (not counter slices)
	incomplete   bool
	invalid      *pool.InvalidError
	bindingConds bool
	devBase      int32 // first local device index
	ctrBase      int32 // first local counter index
	setBase      int32 // first local counter set index
}

// gatherPools selects the pools upstream considers for the node and judges
// each as the node sees it (poolView). A slice is relevant when its
// nodeName, allNodes or nodeSelector matches the node, or, with
// perDeviceNodeSelection, when any of its devices does. Only slices that
// name the node and the few that select nodes otherwise are looked at,
// and only their pools get device tables, so the cost does not depend on
// the number of other nodes. Pools come sorted by driver and pool name,
// pools offering devices with binding conditions last.
func (a *Allocator) gatherPools(node *corev1.Node) ([]nodePool, error) {
	// What the node sees of each pool: the newest generation among the
	// relevant slices, and those slices of it. A node sees few pools; a
	// linear search beats a map here.
	type sight struct {
		pool int32
		vis  []int32
	}
	var seen []sight
	consider := func(si int32) error {
		s := &a.slices[si]
		if !a.g.partitionable && (s.perDeviceSet || s.counters) {
			return nil
		}
		if !a.g.compat && a.usesCompat(si) {
			return nil
		}
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
		id := a.pools[s.pool].p.ID
		i := slices.IndexFunc(seen, func(x sight) bool { return a.pools[x.pool].p.ID == id })
		switch {
		case i < 0:
			seen = append(seen, sight{pool: s.pool, vis: []int32{si}})
		case a.pools[seen[i].pool].p.Generation < a.pools[s.pool].p.Generation:
			seen[i] = sight{pool: s.pool, vis: []int32{si}}
		case seen[i].pool == s.pool:
			seen[i].vis = append(seen[i].vis, si)
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
	out := make([]nodePool, 0, len(seen))
	for _, x := range seen {
		np, ok := a.poolView(x.pool, x.vis)
		if ok {
			out = append(out, np)
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

// poolView judges one generation of a pool from the slices of it that the
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
func (a *Allocator) poolView(pi int32, vis []int32) (np nodePool, ok bool) {
	info := &a.pools[pi]
	t := a.table(pi)
	np = nodePool{pool: pi, t: t}
	declared := a.slices[vis[0]].s.Spec.Pool.ResourceSliceCount
	viaAll := false
	if int64(len(vis)) != declared {
		if info.newer {
			return np, false
		}
		n := int64(0)
		for k := range info.p.Slices {
			if a.g.compat || !a.usesCompat(info.firstSlice+int32(k)) {
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
	for _, si := range vis {
		if !a.slices[si].counters {
			np.slices = append(np.slices, si)
		}
	}
	np.invalid = t.viewProblems(vis, viaAll)
	if np.invalid == nil {
		// Upstream builds no device list for an invalid pool, so it is
		// never a pool "with binding conditions".
		for _, si := range np.slices {
			if t.bindingConds[a.slices[si].local] {
				np.bindingConds = true
			}
		}
	}
	return np, true
}

// viewProblems validates the view of the table's generation made of the
// visible slices vis (sorted) and, with viaAll, the generation's other
// slices. Results are cached per view: a pool's slices are usually all
// visible, or each node sees the same subset.
func (t *poolTable) viewProblems(vis []int32, viaAll bool) *pool.InvalidError {
	a := t.a
	info := &a.pools[t.pool]
	full := len(vis) == len(info.p.Slices)
	if full {
		t.fullOnce.Do(func() { t.fullInvalid = t.validate(vis, false) })
		return t.fullInvalid
	}
	var key strings.Builder
	if viaAll {
		key.WriteString("all:")
	}
	for _, si := range vis {
		key.WriteString(strconv.Itoa(int(si - info.firstSlice)))
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
func (t *poolTable) validate(vis []int32, viaAll bool) *pool.InvalidError {
	a := t.a
	info := &a.pools[t.pool]
	if len(vis) == len(info.p.Slices) && !t.dupNames && !t.badRange && (!a.g.partitionable || !t.suspect(info.p, len(t.sets))) {
		return nil
	}
	v := pool.View{ID: info.p.ID, NoCounters: !a.g.partitionable}
	in := make(map[int32]bool, len(vis))
	for _, si := range vis {
		in[si] = true
		s := a.slices[si].s
		if a.slices[si].counters {
			v.Counters = append(v.Counters, s)
		} else {
			v.Devices = append(v.Devices, s)
		}
	}
	if viaAll {
		for k, s := range info.p.Slices {
			si := info.firstSlice + int32(k)
			if in[si] || (!a.g.compat && a.usesCompat(si)) {
				continue
			}
			if a.slices[si].counters {
				v.Counters = append(v.Counters, s)
			} else {
				v.Others = append(v.Others, s)
			}
		}
	}
	return v.Validate()
}

// usesCompat reports whether some device of the slice declares
// compatibility groups; only read with DRADeviceCompatibilityGroups off,
// when such slices are ignored.
func (a *Allocator) usesCompat(si int32) bool {
	for i := range a.slices[si].s.Spec.Devices {
		for _, c := range a.slices[si].s.Spec.Devices[i].ConsumesCounters {
			if len(c.CompatibilityGroups) > 0 {
				return true
			}
		}
	}
	return false
}
