package allocator

// jointBound: the requests from ri on (up to one that may fail fatally)
// need distinct devices, so together they need at least the sum of their
// smallest counts from the union of their candidates, which the free-device
// and counter bound caps. Admin access may reuse devices and shared devices
// may be picked twice, so either turns the bound off.
func (b *pruning) jointBound(ri int) bool {
	at := b.at
	if len(at.requests)-ri < 2 {
		return true
	}
	if len(b.seen) == 0 {
		b.seen = make([]uint32, len(at.st.inUse))
	}
	b.epoch++
	union := b.union[:0]
	defer func() { b.union = union[:0] }()
	need := 0
	for rj := ri; rj < len(at.requests); rj++ {
		alternatives := at.requests[rj].alternatives
		least := -1
		for _, al := range alternatives {
			if al.mayFail() {
				rj = len(at.requests) // upstream may stop here with an error
				least = -1
				break
			}
			if al.req.admin {
				return true
			}
			cnt := al.count()
			if (al.req.all && len(al.candidates) == 0) || at.st.claimCount[al.req.claim]+cnt > maxResults {
				continue
			}
			if least < 0 || cnt < least {
				least = cnt
			}
			for _, c := range al.candidates {
				if c.d.multi {
					return true
				}
				if b.seen[c.local] != b.epoch {
					b.seen[c.local] = b.epoch
					union = append(union, c)
				}
			}
		}
		if least > 0 {
			need += least
		}
	}
	if need < 2 {
		return true
	}
	return b.countBound(nil, union, need)
}

// failsCleanly is true when the alternative fails without error from the current
// state and from every state that adds picks to it. For "All" that holds
// when its first device is already taken or out of counters: upstream's
// loop stops there, before any constraint could fail fatally. Devices that
// allow multiple allocations are left out, because a share picked later
// lets them skip counters.
func (b *pruning) failsCleanly(al *alternative) bool {
	at := b.at
	switch {
	case al.req.all && len(al.candidates) == 0:
		return true
	case at.st.claimCount[al.req.claim]+al.count() > maxResults:
		return true
	case !al.mayFail():
		return !b.mayFit(al)
	case !al.req.all:
		return false
	}
	c := al.candidates[0]
	d := c.d
	if d.multi {
		return false
	}
	if at.busy(al, c, d) {
		return true
	}
	np := &at.pools[c.pool]
	return len(d.uses) > 0 && (np.h.overcommitted || !at.countersFit(np, d))
}

// mayFit is false when the alternative cannot be satisfied from the current state
// or any state that adds picks to it.
func (b *pruning) mayFit(al *alternative) bool {
	cnt := al.count()
	switch {
	case al.req.all && len(al.candidates) == 0:
		return false
	case b.at.st.claimCount[al.req.claim]+cnt > maxResults:
		return false
	case cnt == 0:
		return true
	}
	return b.boundOK(al, al.candidates, cnt)
}

// boundOK is an upper bound on how many of rest could still be picked
// together: devices must be free, admitted by the active constraints and fit
// the remaining counters alone; per counter set, no more can be placed than
// the room of a counter divided by the smallest amount any of them takes.
// Claim constraints bound it further (valueBound). It never rejects a
// feasible branch, so first-fit order is unaffected.
func (b *pruning) boundOK(al *alternative, rest []candidate, need int) bool {
	if !b.countBound(al, rest, need) {
		return false
	}
	for _, i := range al.req.applies {
		cs := b.at.cons[al.req.claim][i]
		if cs.match && len(cs.stack) > 0 {
			// admitted already keeps only devices that overlap the running
			// intersection.
			continue
		}
		if !b.valueBound(al, cs, rest, need) {
			return false
		}
	}
	return true
}

// scalarKey is a single attribute value, to group devices by it.
type scalarKey struct {
	kind uint8
	i    int64
	s    string
}

// valueBound: devices picked under matchAttribute share one value, under
// distinctAttribute all differ, so with scalar values at most the largest
// group, or the number of distinct values, can be picked together. A
// candidate whose evaluation failed counts for every group. List values
// (overlap instead of equality) are not bounded.
func (b *pruning) valueBound(al *alternative, cs *constraintState, rest []candidate, need int) bool {
	at := b.at
	if b.groups == nil {
		b.groups = map[scalarKey]int32{}
	}
	groups := b.groups
	clear(groups)
	wild, best := 0, 0
	for _, c := range rest {
		if c.err != nil {
			wild++
		} else {
			if at.busy(al, c, c.d) || !b.admitted(al, c) {
				continue
			}
			v, err := at.attrFor(al, cs, c.d)
			if err != nil {
				return true
			}
			var k scalarKey
			switch {
			case len(v.ints) == 1 && len(v.strs) == 0:
				k = scalarKey{kind: v.kind, i: v.ints[0]}
			case len(v.strs) == 1 && len(v.ints) == 0:
				k = scalarKey{kind: v.kind, s: v.strs[0]}
			default:
				return true
			}
			n := groups[k] + 1
			groups[k] = n
			switch {
			case cs.match:
				best = max(best, int(n))
			case n == 1:
				best++
			}
		}
		if best+wild >= need {
			return true
		}
	}
	return false
}

// countBound is the free-device and counter part of boundOK.
func (b *pruning) countBound(al *alternative, rest []candidate, need int) bool {
	at := b.at
	free := 0
	touched := b.touched[:0]
	defer func() { b.touched = touched[:0] }()
	reset := func() {
		for _, t := range touched {
			b.cntSet[t.local] = 0
			np := &at.pools[t.np]
			si := &np.t.sets[t.set]
			for j := range si.names {
				lc := np.ctrBase + si.ctrStart + int32(j)
				b.cntCtr[lc], b.minAmt[lc] = 0, 0
			}
		}
	}
	for _, c := range rest {
		d := c.d
		if c.err != nil {
			free++
		} else {
			if al == nil {
				// Devices for several requests: none with admin access.
				if at.st.inUse[c.local] > 0 || (c.fromAll && at.pools[c.pool].h.allocated(d.idx)) {
					continue
				}
			} else if at.busy(al, c, d) || !b.admitted(al, c) {
				continue
			}
			np := &at.pools[c.pool]
			if len(d.uses) == 0 || at.skipCounters(c, d) {
				free++
			} else {
				if np.h.overcommitted || !at.countersFit(np, d) {
					continue
				}
				ls := np.setBase + d.bucket
				if b.cntSet[ls] == 0 {
					touched = append(touched, touchedSet{local: ls, set: d.bucket, np: c.pool})
				}
				b.cntSet[ls]++
				for _, u := range d.bucketUses {
					lc := np.ctrBase + u.rel
					if b.cntCtr[lc] == 0 || u.amt < b.minAmt[lc] {
						b.minAmt[lc] = u.amt
					}
					b.cntCtr[lc]++
				}
			}
		}
		if free >= need {
			reset()
			return true
		}
	}
	total := free
	for _, t := range touched {
		np := &at.pools[t.np]
		si := &np.t.sets[t.set]
		room := int64(b.cntSet[t.local])
		for j := range si.names {
			rel := si.ctrStart + int32(j)
			lc := np.ctrBase + rel
			if b.cntCtr[lc] == b.cntSet[t.local] && b.minAmt[lc] > 0 {
				if q := (np.t.capacity[rel] - at.st.used[lc]) / b.minAmt[lc]; q < uint64(room) {
					room = int64(q)
				}
			}
		}
		total += int(room)
	}
	reset()
	return total >= need
}

// admitted: the active constraints admit the candidate. A derived
// attribute that fails to evaluate admits it: the search reports the
// error when it reaches the device.
func (b *pruning) admitted(al *alternative, c candidate) bool {
	for _, i := range al.req.applies {
		cs := b.at.cons[al.req.claim][i]
		v, err := b.at.attrFor(al, cs, c.d)
		if err == nil && !cs.admits(v) {
			return false
		}
	}
	return true
}
