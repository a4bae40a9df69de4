package allocator

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// order orders an alternative's candidates for BestFit: first the
// devices that take away the last allocatable device of the fewest sizes
// (a size is what a device consumes from its set, wherever in the set: a
// MIG profile), then those that waste the least of their counter set, then
// those that make the fewest other devices of their sets unallocatable,
// then those in the most used sets (pack before spreading), then
// upstream's order. Devices without counters cost nothing. The search over
// this order is still complete; only preference changes.
//
// Keeping the last instance of every size first is what keeps a pool able
// to serve a request of any size as long as possible.
//
// Waste is what a device puts out of reach beyond what it takes itself
// (reachableFill): how much less of the set the free devices can still
// fill once it is placed. A 1g.10gb instance on the seventh memory slice
// of an H100 leaves the eighth slice to no device at all, while on the
// first slice it leaves the second to the next 1g.10gb; counting lost
// devices alone prefers the former (it loses four devices, the latter
// six) and strands a slice on every GPU it touches. Waste also keeps
// whole GPUs whole: the first instance on an empty GPU puts out of reach
// what only the full-GPU profiles use, so a partly used GPU that can take
// the device without waste is preferred. On the MIG packing streams,
// ranking by waste places 614 claims of an offline maximum of 619, where
// lost devices alone placed 606 and lost devices after the last instance
// of every size 609; on 48 other streams it places 1217 against 1204 (the
// offline maximum is 1235).
//
// Counting lost devices, not weighing them by the share of the set they
// would take, is deliberate: on the MIG packing streams a share-weighted
// loss (linear, squared, or divided by how many sets still offer the same
// placement) placed fewer claims (310 against 315 of an offline maximum
// of 321), because it trades several small placements for one large one
// that the stream then does not ask for. So did ranking by how many
// instances of each size the pool could still hold, summed or weighted by
// how often each size is held (598 to 604 claims against 609): it cannot
// see a stranded slice.
func (bestFit) order(at *attempt, al *alternative) []candidate {
	if al.req.all {
		// "All" takes every candidate, in upstream's order.
		return al.candidates
	}
	type scored struct {
		c                candidate
		crit, lost, open int
		waste            int64
		pos              int
	}
	sc := make([]scored, len(al.candidates))
	// How many allocatable devices of each size (the amounts a device
	// takes from its set, sorted, whichever counters they are) each pool
	// still has: losing the last one of a size is critical.
	type sigKey struct {
		np   int32
		size sizeKey
	}
	avail := map[sigKey]int{}
	sizeOf := func(od *devInfo) sizeKey { return sizeOfUses(od.bucketUses) }
	for _, c := range al.candidates {
		if c.err != nil || len(c.d.uses) == 0 || c.d.bucket < 0 {
			continue
		}
		np := &at.pools[c.pool]
		if _, done := avail[sigKey{c.pool, sizeKey{}}]; done {
			continue
		}
		avail[sigKey{c.pool, sizeKey{}}] = 0
		t := np.t
		t.all()
		for si := range t.sets {
			for _, o := range t.sets[si].devices {
				od := t.dev(o)
				if od.bucket < 0 || at.st.inUse[np.devBase+o] > 0 || np.h.allocated(o) || !at.countersFit(np, od) {
					continue
				}
				avail[sigKey{c.pool, sizeOf(od)}]++
			}
		}
	}
	// The fill each set can still reach, before any candidate is placed.
	type setFill struct {
		pool, set int32
		fill      float64
	}
	var fills []setFill
	fillOf := func(pool int32, np *nodePool, set int32) float64 {
		for _, f := range fills {
			if f.pool == pool && f.set == set {
				return f.fill
			}
		}
		f := at.reachableFill(np, set)
		fills = append(fills, setFill{pool, set, f})
		return f
	}
	for i, c := range al.candidates {
		sc[i] = scored{c: c, pos: i}
		d := c.d
		if c.err != nil || len(d.uses) == 0 || d.bucket < 0 {
			continue
		}
		np := &at.pools[c.pool]
		t := np.t
		t.all()
		if at.st.inUse[np.devBase+d.idx] == 0 && !np.h.allocated(d.idx) && at.countersFit(np, d) {
			before := fillOf(c.pool, np, d.bucket)
			at.take(np, d, 1)
			after := at.reachableFill(np, d.bucket)
			at.take(np, d, -1)
			// Rounded, so that the same waste reached by summing in another
			// order compares equal.
			sc[i].waste = int64(math.Round((before - after - t.share(&t.sets[d.bucket], d)) * 1e6))
		}
		for _, o := range t.sets[d.bucket].devices {
			if o == d.idx {
				continue
			}
			od := t.dev(o)
			ol := np.devBase + o
			if at.st.inUse[ol] > 0 || np.h.allocated(o) || !at.countersFit(np, od) {
				continue
			}
			sc[i].open++
			for _, u := range od.bucketUses {
				lc := np.ctrBase + u.rel
				extra := uint64(0)
				for _, du := range d.uses {
					if du.rel == u.rel {
						extra = du.amt
						break
					}
				}
				if left := np.t.capacity[u.rel] - at.st.used[lc]; extra > left || u.amt > left-extra {
					sc[i].lost++
					if avail[sigKey{c.pool, sizeOf(od)}] <= 1 {
						sc[i].crit++
					}
					break
				}
			}
		}
	}
	slices.SortStableFunc(sc, func(x, y scored) int {
		if x.crit != y.crit {
			return x.crit - y.crit
		}
		if x.waste != y.waste {
			return cmp.Compare(x.waste, y.waste)
		}
		if x.lost != y.lost {
			return x.lost - y.lost
		}
		if x.open != y.open {
			return x.open - y.open
		}
		return x.pos - y.pos
	})
	out := make([]candidate, len(sc))
	for i := range sc {
		out[i] = sc[i].c
	}
	return out
}

// reachableFill estimates how much of counter set si the devices that are
// still free could fill together, in shares (genTable.share): it takes
// the free device with the largest share that fits, then the next, until
// none fits, and undoes it all. Taking the largest first finds the fullest
// packing of partitions that nest, as MIG placements do; in general it is
// an estimate. It costs the set's devices times the devices it takes.
func (at *attempt) reachableFill(np *nodePool, si int32) float64 {
	t := np.t
	set := &t.sets[si]
	var fill float64
	var taken [16]int32
	took := taken[:0]
	for {
		best, bestShare := -1, 0.0
		for j, o := range set.devices {
			if sh := set.shares[j]; sh > bestShare && at.st.inUse[np.devBase+o] == 0 && !np.h.allocated(o) && at.countersFit(np, t.dev(o)) {
				best, bestShare = j, sh
			}
		}
		if best < 0 {
			break
		}
		o := set.devices[best]
		at.take(np, t.dev(o), 1)
		took = append(took, o)
		fill += bestShare
	}
	for _, o := range took {
		at.take(np, t.dev(o), -1)
	}
	return fill
}

// take marks d picked (n = 1) or no longer picked (n = -1) for the
// attempt, counters included, without recording a pick: scoring tries
// devices on and takes them off again.
func (at *attempt) take(np *nodePool, d *devInfo, n int32) {
	at.st.inUse[np.devBase+d.idx] += n
	for _, u := range d.uses {
		lc := np.ctrBase + u.rel
		if n > 0 {
			at.st.used[lc] += u.amt
		} else {
			at.st.used[lc] -= u.amt
		}
	}
}

// sizeKey is a device's size: the amounts it takes from its counter set,
// sorted. Up to len(small) amounts are kept inline, so that scoring a
// candidate allocates nothing; more spill into rest.
type sizeKey struct {
	n     int
	small [16]uint64
	rest  string
}

func sizeOfUses(uses []counterUse) sizeKey {
	var k sizeKey
	k.n = len(uses)
	if len(uses) > len(k.small) {
		amts := make([]uint64, len(uses))
		for i, u := range uses {
			amts[i] = u.amt
		}
		slices.Sort(amts)
		k.rest = fmt.Sprint(amts)
		return k
	}
	for i, u := range uses {
		k.small[i] = u.amt
	}
	slices.Sort(k.small[:len(uses)])
	return k
}
