package allocator

// jointBound: the requests from ri on (up to one that may fail fatally)
// need distinct devices, so together they need at least the sum of their
// smallest counts from the union of their candidates, which the free-device
// and counter bound caps. Admin access may reuse devices and shared devices
// may be picked twice, so either turns the bound off.
func (at *attempt) jointBound(ri int) bool {
	if len(at.requests)-ri < 2 {
		return true
	}
	if len(at.seen) == 0 {
		at.seen = make([]uint32, len(at.inUse))
	}
	at.epoch++
	union := at.union[:0]
	defer func() { at.union = union[:0] }()
	need := 0
	for rj := ri; rj < len(at.requests); rj++ {
		alternatives := at.requests[rj].alternatives
		least := -1
		for _, al := range alternatives {
			if al.mayFail {
				rj = len(at.requests) // upstream may stop here with an error
				least = -1
				break
			}
			if al.admin {
				return true
			}
			if (al.all && len(al.candidates) == 0) || at.claimCount[al.claim]+al.count > maxResults {
				continue
			}
			if least < 0 || al.count < least {
				least = al.count
			}
			for _, c := range al.candidates {
				if c.d.multi {
					return true
				}
				if at.seen[c.local] != at.epoch {
					at.seen[c.local] = at.epoch
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
	return at.countBound(nil, union, need)
}

// failsCleanly is true when the alternative fails without error from the current
// state and from every state that adds picks to it. For "All" that holds
// when its first device is already taken or out of counters: upstream's
// loop stops there, before any constraint could fail fatally. Devices that
// allow multiple allocations are left out, because a share picked later
// lets them skip counters.
func (at *attempt) failsCleanly(al *alternative) bool {
	switch {
	case al.all && len(al.candidates) == 0:
		return true
	case at.claimCount[al.claim]+al.count > maxResults:
		return true
	case !al.mayFail:
		return !at.mayFit(al)
	case !al.all:
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
func (at *attempt) mayFit(al *alternative) bool {
	switch {
	case al.all && len(al.candidates) == 0:
		return false
	case at.claimCount[al.claim]+al.count > maxResults:
		return false
	case al.count == 0:
		return true
	}
	return at.boundOK(al, al.candidates, al.count)
}

// boundOK is an upper bound on how many of rest could still be picked
// together: devices must be free, admitted by the active constraints and fit
// the remaining counters alone; per counter set, no more can be placed than
// the room of a counter divided by the smallest amount any of them takes.
// Claim constraints bound it further (valueBound). It never rejects a
// feasible branch, so first-fit order is unaffected.
func (at *attempt) boundOK(al *alternative, rest []candidate, need int) bool {
	if !at.countBound(al, rest, need) {
		return false
	}
	for _, i := range al.applies {
		cs := at.cons[al.claim][i]
		if cs.match && len(cs.stack) > 0 {
			// admitted already keeps only devices that overlap the running
			// intersection.
			continue
		}
		if !at.valueBound(al, cs, rest, need) {
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
func (at *attempt) valueBound(al *alternative, cs *constraintState, rest []candidate, need int) bool {
	if at.groups == nil {
		at.groups = map[scalarKey]int32{}
	}
	groups := at.groups
	clear(groups)
	wild, best := 0, 0
	for _, c := range rest {
		if c.err != nil {
			wild++
		} else {
			if at.busy(al, c, c.d) || !at.admitted(al, c) {
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
func (at *attempt) countBound(al *alternative, rest []candidate, need int) bool {
	free := 0
	touched := at.touched[:0]
	defer func() { at.touched = touched[:0] }()
	reset := func() {
		for _, t := range touched {
			at.cntSet[t.local] = 0
			np := &at.pools[t.np]
			si := &np.t.sets[t.set]
			for j := range si.names {
				lc := np.ctrBase + si.ctrStart + int32(j)
				at.cntCtr[lc], at.minAmt[lc] = 0, 0
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
				if at.inUse[c.local] > 0 || (c.fromAll && at.pools[c.pool].h.allocated(d.idx)) {
					continue
				}
			} else if at.busy(al, c, d) || !at.admitted(al, c) {
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
				if at.cntSet[ls] == 0 {
					touched = append(touched, touchedSet{local: ls, set: d.bucket, np: c.pool})
				}
				at.cntSet[ls]++
				for _, u := range d.bucketUses {
					lc := np.ctrBase + u.rel
					if at.cntCtr[lc] == 0 || u.amt < at.minAmt[lc] {
						at.minAmt[lc] = u.amt
					}
					at.cntCtr[lc]++
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
		room := int64(at.cntSet[t.local])
		for j := range si.names {
			rel := si.ctrStart + int32(j)
			lc := np.ctrBase + rel
			if at.cntCtr[lc] == at.cntSet[t.local] && at.minAmt[lc] > 0 {
				if q := (np.t.capacity[rel] - at.used[lc]) / at.minAmt[lc]; q < uint64(room) {
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
func (at *attempt) admitted(al *alternative, c candidate) bool {
	for _, i := range al.applies {
		cs := at.cons[al.claim][i]
		v, err := at.attrFor(al, cs, c.d)
		if err == nil && !cs.admits(v) {
			return false
		}
	}
	return true
}

func (at *attempt) countersFit(np *nodePool, d *devInfo) bool {
	for _, u := range d.uses {
		if u.amt > np.t.capacity[u.rel]-at.used[np.ctrBase+u.rel] {
			return false
		}
	}
	return true
}
