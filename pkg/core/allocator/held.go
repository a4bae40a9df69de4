package allocator

import (
	"slices"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// PoolState is a pool as one cluster state has it: its table together with
// the results of allocated claims that name the pool, which hold devices,
// counters, shares and consumed capacity. It is immutable and safe for
// concurrent use; what it derives from the results is computed once per
// generation, on first use. An incremental cluster state makes a new one
// when the pool's slices or the results naming it change, and keeps it
// otherwise.
type PoolState struct {
	t    *PoolTable
	held []*resourcev1.DeviceRequestAllocationResult
	// current is for the current generation, older for the others.
	current heldOnce
	older   []heldOnce
}

// heldOnce is one generation's held part, derived on first use: once
// guards h. A once per generation, not per PoolState, because a node that
// sees an older generation (a rollout in progress) must not pay for the
// current one.
type heldOnce struct {
	once sync.Once
	h    heldGen // in place: a new PoolState comes with every claim delta
}

// With pairs the table with the results of allocated claims that name the
// pool. Admin-access results hold nothing, as in kube-scheduler's allocated
// state; they may be passed anyway. The results must not be modified
// afterwards.
func (pt *PoolTable) With(held []*resourcev1.DeviceRequestAllocationResult) *PoolState {
	ps := new(PoolState)
	pt.WithInto(ps, held)
	return ps
}

// WithInto is With into ps, which must be the zero PoolState and not be
// copied afterwards: for a cluster state that keeps it in an entry of its
// own, one per claim delta.
func (pt *PoolTable) WithInto(ps *PoolState, held []*resourcev1.DeviceRequestAllocationResult) {
	ps.t, ps.held = pt, held
	if len(pt.gens) > 1 {
		ps.older = make([]heldOnce, len(pt.gens)-1)
	}
}

// Table returns the pool's table.
func (ps *PoolState) Table() *PoolTable { return ps.t }

// gen returns generation gi's table and what is held of it.
func (ps *PoolState) gen(gi int) (*genTable, *heldGen) {
	t := ps.t.gens[gi].static()
	return t, ps.heldOf(gi, t)
}

// heldOf is what is held of generation gi, whose table t the caller has.
func (ps *PoolState) heldOf(gi int, t *genTable) *heldGen {
	h := &ps.current
	if gi > 0 {
		h = &ps.older[gi-1]
	}
	h.once.Do(func() { h.h.init(t, ps.held) })
	return &h.h
}

// heldGen is what allocated claims hold of one generation: dedicated
// devices, shares with their consumed capacity, and the counters the held
// devices consume. It is sparse where it can be (a few bits per device),
// because an incremental state derives it again whenever a claim naming
// the pool changes.
type heldGen struct {
	// dedicated: held by an allocated claim as a dedicated device.
	dedicated bitset
	// shared: an allocated claim holds a share of the device (shareID or
	// consumed capacity). Such a device's counters are already consumed.
	shared bitset
	// consumed is the capacity the shares of a device consume, by device.
	consumed map[int32]capMap
	// take is what held devices consume of the counters takeLo,
	// takeLo+1, ..., each at most the counter's capacity; counters
	// outside the window are untouched. An attempt starts its count of
	// used counters from it (searchState.base). It is a window rather than an
	// array per counter because a claim delta derives it again, and a
	// claim's devices usually draw from one counter set of many (one GPU
	// of a node's eight).
	takeLo int32
	take   []uint64
	// overcommitted: held devices consume more of some counter than there
	// is. Upstream then rejects every counter-consuming device of the
	// pool, because it checks all counters of the pool after adding a
	// device. over are those counters (taken whole in take), sorted.
	overcommitted bool
	over          []int32
	// baseline is per counter set: the compatibility groups of the held
	// devices drawing from it; nil when the pool declares no groups.
	baseline []compatState
}

// bitset is one bit per device; nil has none set.
type bitset []uint64

func (b bitset) has(i int32) bool { return b != nil && b[i>>6]&(1<<(i&63)) != 0 }

func (b *bitset) set(i, n int32) {
	if *b == nil {
		*b = make(bitset, (n+63)/64)
	}
	(*b)[i>>6] |= 1 << (i & 63)
}

func (h *heldGen) allocated(i int32) bool { return h.dedicated.has(i) }

func (h *heldGen) shareInUse(i int32) bool { return h.shared.has(i) }

func (h *heldGen) aggCap(i int32) capMap { return h.consumed[i] }

// init applies the results to the generation's table. A result
// names a device by name, so every device of that name is held: with
// duplicate names in slices a node does not see, the pool is still valid
// for the node. Results with a shareID are shares (their consumed
// capacity adds up per device); everything else holds the device whole.
// Counters are taken once per device however many shares it has, in device
// order, as upstream does: compatibility-group baselines depend on it.
func (h *heldGen) init(t *genTable, held []*resourcev1.DeviceRequestAllocationResult) {
	h.alloc(t, held)
	var buf [8]int32
	withCtr := buf[:0]
	for _, r := range held {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		for _, nd := range t.named(r.Device) {
			if nd.counters && !h.dedicated.has(nd.idx) && !h.shared.has(nd.idx) {
				withCtr = append(withCtr, nd.idx)
			}
			if r.ShareID == nil {
				h.dedicated.set(nd.idx, t.nDevs)
				continue
			}
			h.shared.set(nd.idx, t.nDevs)
			if r.ConsumedCapacity != nil {
				if h.consumed == nil {
					h.consumed = map[int32]capMap{}
				}
				agg := h.consumed[nd.idx]
				if agg == nil {
					agg = capMap{}
					h.consumed[nd.idx] = agg
				}
				for name, q := range r.ConsumedCapacity {
					cur := agg[name]
					cur.Add(q)
					agg[name] = cur
				}
			}
		}
	}
	if len(withCtr) == 0 {
		return
	}
	slices.Sort(withCtr)
	if t.usesCompat {
		h.baseline = make([]compatState, len(t.sets))
	}
	lo := h.takeLo
	for _, i := range withCtr {
		d := t.dev(i)
		if t.slices[d.slice].counters {
			continue
		}
		for _, u := range d.uses {
			if u.amt > t.capacity[u.rel]-h.take[u.rel-lo] {
				// Held devices consume more than there is.
				h.over = append(h.over, u.rel)
				h.take[u.rel-lo] = t.capacity[u.rel]
				continue
			}
			h.take[u.rel-lo] += u.amt
		}
		if h.baseline != nil {
			for _, cu := range d.compat {
				h.baseline[cu.set] = h.baseline[cu.set].add(cu.groups)
			}
		}
	}
	if len(h.over) > 0 {
		h.overcommitted = true
		slices.Sort(h.over)
	}
}
