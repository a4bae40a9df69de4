package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// attempt is the state of one Allocate call. One goroutine owns it.
type attempt struct {
	a      *Allocator
	ctx    context.Context
	node   *corev1.Node
	claims []*resourcev1.ResourceClaim
	pools  []nodePool
	slots  []slot
	cons   [][]*constraintState // per claim

	// Dense per-attempt state, indexed by attempt-local indices.
	used   []uint64      // per counter: consumed by picks of this attempt; never above avail
	inUse  []int32       // per device: dedicated picks of this attempt
	compat []compatState // per counter set: running group intersection
	shares map[int32]*shareState

	picks      []pick
	claimCount []int
	steps      int
	// nodes counts the nodes of the search tree in the units of upstream's
	// allocateOne calls (see Stats).
	nodes int64
	// lazy: the first pass, which builds candidates only as far as the
	// search reaches and does not prune, exactly like upstream. It gives up
	// after lazyBudget steps; the second pass builds every candidate list
	// and prunes. Selector results are cached, so little is lost.
	lazy bool
	// deadAt is one more than the slot from which the requests cannot be
	// satisfied together even with nothing else picked (see suffixes); 0
	// when not known. limit > 0 ends a probe search after that many steps.
	deadAt int
	limit  int

	// Scratch for the counter bound.
	cntSet  []int32
	cntCtr  []int32
	minAmt  []uint64
	touched []touchedSet
	groups  map[scalarKey]int32
	// Scratch for jointBound: devices seen in this epoch.
	seen  []uint32
	epoch uint32
	union []cand
}

type shareState struct {
	n    int
	used capMap
}

type touchedSet struct {
	local int32
	set   int32
	np    int32
}

// pick is one device chosen for one alt, with what is needed to undo it.
type pick struct {
	al       *alt
	c        cand
	counters bool
	compat   []savedCompat
	nCons    int
	consumed capMap
	shareID  *types.UID
}

type savedCompat struct {
	local int32
	prev  compatState
}

func (at *attempt) size() {
	var nd, nc, ns int32
	for _, np := range at.pools {
		nd += int32(len(np.t.devs))
		nc += int32(len(np.t.avail))
		ns += int32(len(np.t.sets))
	}
	at.used = make([]uint64, nc)
	at.cntCtr = make([]int32, nc)
	at.minAmt = make([]uint64, nc)
	at.inUse = make([]int32, nd)
	at.cntSet = make([]int32, ns)
	at.compat = make([]compatState, ns)
	for _, np := range at.pools {
		if !np.t.usesCompat {
			continue
		}
		for s := range np.t.sets {
			at.compat[np.setBase+int32(s)] = np.t.sets[s].baseline
		}
	}
	at.claimCount = make([]int, len(at.claims))
}

// busy is the in-use test upstream runs first: admin access may reuse
// devices held by other claims but not pick one twice for its own claim.
func (at *attempt) busy(al *alt, c cand, d *devInfo) bool {
	if al.admin {
		if d.multi {
			return false
		}
		for i := len(at.picks) - 1; i >= 0 && at.picks[i].al.claim == al.claim; i-- {
			if at.picks[i].c.l == c.l && !at.picks[i].c.d.multi {
				return true
			}
		}
		return false
	}
	return at.inUse[c.l] > 0 || (c.full && d.allocated)
}

func (at *attempt) skipCounters(c cand, d *devInfo) bool {
	return d.multi && (d.shareInUse || at.shares[c.l] != nil)
}

// tryAdd runs the dynamic checks for one candidate in upstream's order and,
// when they pass, records it. The error is fatal.
func (at *attempt) tryAdd(al *alt, c cand) (bool, error) {
	a := at.a
	d := c.d
	if at.busy(al, c, d) {
		return false, nil
	}
	if c.err != nil {
		return false, c.err
	}
	sh := at.shares[c.l]
	if !c.full && d.multi && sh != nil {
		fits, err := capacityFits(al.capReq, d.cap, d.aggCap, sh.used, a.g.fractional)
		if err != nil {
			return false, at.fatal(al.claim, al.name, fmt.Errorf("checking capacity for device %s: %w", a.devID(d), err))
		}
		if !fits {
			return false, nil
		}
	}
	if c.full {
		if ok, _ := at.usable(d); !ok {
			return false, nil
		}
	}
	np := &at.pools[c.np]
	t := np.t
	pk := pick{al: al, c: c}
	if !at.skipCounters(c, d) && len(d.uses) > 0 {
		if t.usesCompat && a.g.compat {
			for _, cu := range d.compat {
				ls := np.setBase + cu.set
				if !at.compat[ls].admits(cu.groups) {
					at.rollback(&pk)
					return false, nil
				}
				pk.compat = append(pk.compat, savedCompat{local: ls, prev: at.compat[ls]})
				at.compat[ls] = at.compat[ls].add(cu.groups)
			}
		}
		if t.overcommitted {
			at.rollback(&pk)
			return false, nil
		}
		for _, u := range d.uses {
			// Never overflows: used never exceeds avail.
			if u.amt > t.avail[u.rel]-at.used[np.ctrBase+u.rel] {
				at.rollback(&pk)
				return false, nil
			}
		}
		for _, u := range d.uses {
			at.used[np.ctrBase+u.rel] += u.amt
		}
		pk.counters = true
	}
	if c.full && at.blockedByTaint(al, d) {
		at.rollback(&pk)
		return false, nil
	}
	for _, i := range al.applies {
		cs := at.cons[al.claim][i]
		v, err := at.attrFor(al, cs, d)
		if err != nil {
			at.rollback(&pk)
			return false, at.fatal(al.claim, al.name, err)
		}
		if !cs.admits(v) {
			at.rollback(&pk)
			if c.full {
				// Upstream: a claim whose constraint excludes part of
				// "all" devices is a mistake, not a misfit.
				return false, at.fatal(al.claim, al.name, fmt.Errorf("cannot add device %s because a claim constraint would not be satisfied", a.devID(d)))
			}
			return false, nil
		}
		cs.add(v)
		pk.nCons++
	}
	if c.full {
		var shared capMap
		if sh != nil {
			shared = sh.used
		}
		fits, err := at.staticCapacity(al, d, addCap(addCap(nil, d.aggCap), shared))
		if err != nil || !fits {
			at.rollback(&pk)
			if err != nil {
				return false, at.fatal(al.claim, al.name, fmt.Errorf("rechecking capacity for device %s: %w", a.devID(d), err))
			}
			return false, nil
		}
	}
	if d.multi {
		consumed, err := consumption(al.capReq, d.cap, a.g.fractional)
		if err != nil {
			at.rollback(&pk)
			return false, at.fatal(al.claim, al.name, fmt.Errorf("computing consumed capacity for device %s: %w", a.devID(d), err))
		}
		id := a.opts.NewShareID()
		pk.shareID = &id
		pk.consumed = consumed
		if sh == nil {
			if at.shares == nil {
				at.shares = map[int32]*shareState{}
			}
			sh = &shareState{}
			at.shares[c.l] = sh
		}
		sh.n++
		sh.used = addCap(sh.used, consumed)
	} else {
		at.inUse[c.l]++
	}
	at.picks = append(at.picks, pk)
	at.claimCount[al.claim]++
	return true, nil
}

// undo removes the last pick.
func (at *attempt) undo() {
	pk := &at.picks[len(at.picks)-1]
	d := pk.c.d
	if d.multi {
		sh := at.shares[pk.c.l]
		sh.n--
		subCap(sh.used, pk.consumed)
		if sh.n == 0 {
			delete(at.shares, pk.c.l)
		}
	} else {
		at.inUse[pk.c.l]--
	}
	at.claimCount[pk.al.claim]--
	at.rollback(pk)
	at.picks = at.picks[:len(at.picks)-1]
}

// rollback reverts constraints, group intersections and counters.
func (at *attempt) rollback(pk *pick) {
	cons := at.cons[pk.al.claim]
	for j := pk.nCons - 1; j >= 0; j-- {
		cons[pk.al.applies[j]].remove()
	}
	pk.nCons = 0
	for j := len(pk.compat) - 1; j >= 0; j-- {
		at.compat[pk.compat[j].local] = pk.compat[j].prev
	}
	pk.compat = nil
	if pk.counters {
		np := &at.pools[pk.c.np]
		for _, u := range pk.c.d.uses {
			at.used[np.ctrBase+u.rel] -= u.amt
		}
		pk.counters = false
	}
}

// errClaimLimit: every way to satisfy a request breaks the limit of
// results per claim. Picks only add results, so no other choice of
// devices for the requests before it helps; only another firstAvailable
// subrequest of the same claim can. Like upstream's
// errAllocationResultMaxSizeExceeded it unwinds the search to that choice,
// and at a claim boundary it becomes a plain failure.
var errClaimLimit = errors.New("claim limit exceeded")

// solve satisfies slots si.. in order. For a firstAvailable request the
// subrequests are tried in preference order, each with everything after it.
func (at *attempt) solve(si int) (bool, error) {
	at.nodes++
	if si > 0 && (si == len(at.slots) || at.slots[si].claim != at.slots[si-1].claim) {
		// Upstream passes through a node for the end of the claim.
		at.nodes++
	}
	if si == len(at.slots) {
		return true, nil
	}
	sl := &at.slots[si]
	if at.overLimit(sl) {
		if sl.first {
			at.nodes += int64(len(sl.alts))
		}
		return false, errClaimLimit
	}
	if at.limitDoomed(si) {
		return false, errClaimLimit
	}
	if !at.lazy && !at.lookahead(si) {
		return false, nil
	}
	allOver := true
	for ai, al := range sl.alts {
		if sl.first {
			at.nodes++ // each subrequest is a node of its own
		}
		if al.all && len(al.cands) == 0 {
			allOver = false
			continue
		}
		if at.claimCount[al.claim]+al.count > maxResults {
			continue
		}
		order := al.cands
		if at.a.opts.Strategy == BestFit && !al.all {
			order = at.bestFitOrder(al)
		}
		ok, err := at.fill(si, al, order, 0, 0)
		if errors.Is(err, errClaimLimit) {
			continue
		}
		allOver = false
		if err != nil {
			return false, err
		}
		if ok {
			sl.chosen = ai
			return true, nil
		}
	}
	if allOver {
		return false, errClaimLimit
	}
	return false, nil
}

// overLimit: every alt of the slot asks for more devices than the claim
// has room for.
func (at *attempt) overLimit(sl *slot) bool {
	for _, al := range sl.alts {
		if (al.all && len(al.cands) == 0) || at.claimCount[al.claim]+al.count <= maxResults {
			return false
		}
	}
	return true
}

// limitDoomed: some later request of the same claim breaks the claim limit
// even if every request up to it takes its smallest alternative. Only
// decided when none of the claim's requests can fail fatally, so that no
// error upstream would meet while trying other devices is skipped.
func (at *attempt) limitDoomed(si int) bool {
	c := at.slots[si].claim
	for sj := si - 1; sj >= 0 && at.slots[sj].claim == c; sj-- {
		if slices.ContainsFunc(at.slots[sj].alts, func(al *alt) bool { return al.mayFail }) {
			return false
		}
	}
	n := at.claimCount[c]
	for sj := si; sj < len(at.slots) && at.slots[sj].claim == c; sj++ {
		least := -1
		for _, al := range at.slots[sj].alts {
			if al.mayFail || (al.all && len(al.cands) == 0) {
				return false
			}
			if least < 0 || al.count < least {
				least = al.count
			}
		}
		if n+least > maxResults {
			return true
		}
		n += least
	}
	return false
}

// fill picks device k of the alt from order[pos:]. Devices of one request
// are tried as increasing combinations, as upstream does, so that no set of
// devices is tried twice.
func (at *attempt) fill(si int, al *alt, order []cand, k, pos int) (bool, error) {
	if k > 0 {
		at.nodes++
	}
	at.steps++
	if at.steps&63 == 0 {
		if err := at.ctx.Err(); err != nil {
			return false, err
		}
	}
	if at.limit > 0 && at.steps > at.limit {
		return false, errProbeBudget
	}
	if k == al.count {
		ok, err := at.solve(si + 1)
		if errors.Is(err, errClaimLimit) && si+1 < len(at.slots) && at.slots[si+1].claim != al.claim {
			return false, nil
		}
		return ok, err
	}
	if at.lazy && !al.all {
		return at.fillLazy(si, al, k, pos)
	}
	if al.all {
		ok, err := at.tryAdd(al, order[k])
		if err != nil || !ok {
			return false, err
		}
		done, err := at.fill(si, al, order, k+1, 0)
		if err != nil || !done {
			at.undo()
			return false, err
		}
		return true, nil
	}
	need := al.count - k
	last := len(order) - need
	if al.mayFail {
		// Upstream visits every remaining device even when too few are
		// left, and one of them may be an error it must report.
		last = len(order) - 1
	} else {
		if len(order)-pos < need {
			return false, nil
		}
		if need > 1 && !at.boundOK(al, order[pos:], need) {
			return false, nil
		}
	}
	for i := pos; i <= last; i++ {
		ok, err := at.tryAdd(al, order[i])
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		done, err := at.fill(si, al, order, k+1, i+1)
		if err == nil && done {
			return true, nil
		}
		at.undo()
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// errLazyBudget ends the first pass.
var errLazyBudget = errors.New("first pass over budget")

// lazyBudget is the number of search steps and devices tried the first pass
// may take: enough for the common case where first-fit succeeds (or fails)
// within a few devices per request.
const lazyBudget = 256

// fillLazy is fill for the first pass: upstream's plain enumeration, with
// candidates built as it reaches them.
func (at *attempt) fillLazy(si int, al *alt, k, pos int) (bool, error) {
	if at.steps > lazyBudget {
		return false, errLazyBudget
	}
	for i := pos; i < len(al.cands) || at.more(al); i++ {
		// Every device tried counts: a failing constraint can reject
		// thousands without recursing.
		if at.steps++; at.steps > lazyBudget {
			return false, errLazyBudget
		}
		ok, err := at.tryAdd(al, al.cands[i])
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		done, err := at.fill(si, al, nil, k+1, i+1)
		if err == nil && done {
			return true, nil
		}
		at.undo()
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// lookahead checks that every later request, of any claim, still has room
// for its count given what is picked now; for a firstAvailable request at
// least one subrequest must. Picks only shrink what is available and other
// claims' constraints are untouched, so a failure here holds for the whole
// subtree, and upstream would fail there too, after trying every
// combination of the requests in between.
func (at *attempt) lookahead(si int) bool {
	for sj := si; sj < len(at.slots); sj++ {
		if sj+1 == at.deadAt {
			return false
		}
		alts := at.slots[sj].alts
		if slices.ContainsFunc(alts, func(al *alt) bool { return al.mayFail }) {
			// Upstream would reach this request and could fail fatally
			// there; pruning on a later one would turn that into unfit,
			// unless every alternative is sure to fail without error.
			return slices.ContainsFunc(alts, func(al *alt) bool { return !at.failsCleanly(al) })
		}
		if !slices.ContainsFunc(alts, at.mayFit) {
			return false
		}
	}
	return at.jointBound(si)
}

// jointBound: the requests from si on (up to one that may fail fatally)
// need distinct devices, so together they need at least the sum of their
// smallest counts from the union of their candidates, which the free-device
// and counter bound caps. Admin access may reuse devices and shared devices
// may be picked twice, so either turns the bound off.
func (at *attempt) jointBound(si int) bool {
	if len(at.slots)-si < 2 {
		return true
	}
	if len(at.seen) == 0 {
		at.seen = make([]uint32, len(at.inUse))
	}
	at.epoch++
	union := at.union[:0]
	defer func() { at.union = union[:0] }()
	need := 0
	for sj := si; sj < len(at.slots); sj++ {
		alts := at.slots[sj].alts
		least := -1
		for _, al := range alts {
			if al.mayFail {
				sj = len(at.slots) // upstream may stop here with an error
				least = -1
				break
			}
			if al.admin {
				return true
			}
			if (al.all && len(al.cands) == 0) || at.claimCount[al.claim]+al.count > maxResults {
				continue
			}
			if least < 0 || al.count < least {
				least = al.count
			}
			for _, c := range al.cands {
				if c.d.multi {
					return true
				}
				if at.seen[c.l] != at.epoch {
					at.seen[c.l] = at.epoch
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

// failsCleanly is true when the alt fails without error from the current
// state and from every state that adds picks to it. For "All" that holds
// when its first device is already taken or out of counters: upstream's
// loop stops there, before any constraint could fail fatally. Devices that
// allow multiple allocations are left out, because a share picked later
// lets them skip counters.
func (at *attempt) failsCleanly(al *alt) bool {
	switch {
	case al.all && len(al.cands) == 0:
		return true
	case at.claimCount[al.claim]+al.count > maxResults:
		return true
	case !al.mayFail:
		return !at.mayFit(al)
	case !al.all:
		return false
	}
	c := al.cands[0]
	d := c.d
	if d.multi {
		return false
	}
	if at.busy(al, c, d) {
		return true
	}
	np := &at.pools[c.np]
	return len(d.uses) > 0 && (np.t.overcommitted || !at.countersFit(np, d))
}

// errProbeBudget ends a probe of suffixes.
var errProbeBudget = errors.New("probe over budget")

// probeBudget bounds the steps suffixes spends on each probe.
const probeBudget = 4096

// suffixes finds the latest slot from which the remaining requests cannot
// be satisfied together even on a fresh state, and records it in
// at.deadAt. A search from any slot before it fails there too: picks
// only take devices, counters, constraint values and result room away, so
// the later requests fit no better. That needs every later request to be
// unable to fail fatally (upstream would report that instead) and no
// device that allows multiple allocations (a share picked earlier lets
// later picks of the device skip counters). Each probe is a complete
// search of the suffix, bounded by probeBudget; when over budget nothing is
// concluded.
func (at *attempt) suffixes() error {
	for sj := len(at.slots) - 1; sj >= 1; sj-- {
		for _, al := range at.slots[sj].alts {
			if al.mayFail || slices.ContainsFunc(al.cands, func(c cand) bool { return c.d.multi }) {
				return nil
			}
		}
		probe := &attempt{a: at.a, ctx: at.ctx, node: at.node, claims: at.claims, pools: at.pools, cons: at.cons,
			slots: slices.Clone(at.slots[sj:]), limit: probeBudget}
		probe.size()
		ok, err := probe.solve(0)
		at.a.probeNodes.Add(probe.nodes)
		if errors.Is(err, errClaimLimit) {
			ok, err = false, nil
		}
		for _, css := range at.cons {
			for _, cs := range css {
				cs.stack = cs.stack[:0]
			}
		}
		switch {
		case errors.Is(err, errProbeBudget):
			return nil
		case err != nil:
			return err
		case !ok:
			at.deadAt = sj + 1
			return nil
		}
	}
	return nil
}

// mayFit is false when the alt cannot be satisfied from the current state
// or any state that adds picks to it.
func (at *attempt) mayFit(al *alt) bool {
	switch {
	case al.all && len(al.cands) == 0:
		return false
	case at.claimCount[al.claim]+al.count > maxResults:
		return false
	case al.count == 0:
		return true
	}
	return at.boundOK(al, al.cands, al.count)
}

// boundOK is an upper bound on how many of rest could still be picked
// together: devices must be free, admitted by the active constraints and fit
// the remaining counters alone; per counter set, no more can be placed than
// the room of a counter divided by the smallest amount any of them takes.
// Claim constraints bound it further (valueBound). It never rejects a
// feasible branch, so first-fit order is unaffected.
func (at *attempt) boundOK(al *alt, rest []cand, need int) bool {
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
func (at *attempt) valueBound(al *alt, cs *constraintState, rest []cand, need int) bool {
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
func (at *attempt) countBound(al *alt, rest []cand, need int) bool {
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
				if at.inUse[c.l] > 0 || (c.full && d.allocated) {
					continue
				}
			} else if at.busy(al, c, d) || !at.admitted(al, c) {
				continue
			}
			np := &at.pools[c.np]
			if len(d.uses) == 0 || at.skipCounters(c, d) {
				free++
			} else {
				if np.t.overcommitted || !at.countersFit(np, d) {
					continue
				}
				ls := np.setBase + d.bucket
				if at.cntSet[ls] == 0 {
					touched = append(touched, touchedSet{local: ls, set: d.bucket, np: c.np})
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
				if q := (np.t.avail[rel] - at.used[lc]) / at.minAmt[lc]; q < uint64(room) {
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
func (at *attempt) admitted(al *alt, c cand) bool {
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
		if u.amt > np.t.avail[u.rel]-at.used[np.ctrBase+u.rel] {
			return false
		}
	}
	return true
}
