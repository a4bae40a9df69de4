package allocator

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// attempt is the state of one Allocate call. One goroutine owns it.
type attempt struct {
	a        *Allocator
	ctx      context.Context
	node     *corev1.Node
	claims   []*resourcev1.ResourceClaim
	plan     []claimPlan
	pools    []nodePool
	requests []claimRequest
	cons     [][]*constraintState // per claim

	scratch *scratch
	bufs    *attemptBufs // nil for probes
	// Dense per-attempt state, indexed by attempt-local indices.
	// base is per counter what held devices consume (heldGen.take); used
	// is that plus what picks of this attempt consume, never above the
	// counter's capacity.
	base   []uint64
	used   []uint64
	inUse  []int32       // per device: dedicated picks of this attempt
	compat []compatState // per counter set: running group intersection
	shares map[int32]*shareState

	picks      []pick
	claimCount []int
	steps      int
	// nodes counts the nodes of the search tree in the units of upstream's
	// allocateOne calls (see Stats).
	nodes int64
	// firstPass: candidates are built only as far as the search reaches
	// and nothing is pruned (firstpass.go).
	firstPass bool
	// infeasibleFrom is the first request of the final ones that cannot be
	// satisfied together even with nothing else picked (suffix.go); 0 when
	// not known.
	infeasibleFrom int
	// stepLimit > 0 ends the search with overBudget after that many steps.
	stepLimit  int
	overBudget error

	// Scratch for the counter bound.
	cntSet  []int32
	cntCtr  []int32
	minAmt  []uint64
	touched []touchedSet
	groups  map[scalarKey]int32
	// Scratch for jointBound: devices seen in this epoch.
	seen  []uint32
	epoch uint32
	union []candidate
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

// pick is one device chosen for one alternative, with what is needed to undo it.
type pick struct {
	al       *alternative
	c        candidate
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
		nd += np.t.nDevs
		nc += int32(len(np.t.capacity))
		ns += int32(len(np.t.sets))
	}
	sc := at.scratch
	if sc == nil {
		// A probe: its arrays are left to the garbage collector.
		sc = scratchPool.Get().(*scratch)
		at.scratch = sc
	}
	at.base, sc.base = zeroed(sc.base, nc), nil
	for _, np := range at.pools {
		copy(at.base[np.ctrBase+np.h.takeLo:], np.h.take)
	}
	at.used, sc.used = zeroed(sc.used, nc), nil
	copy(at.used, at.base)
	at.cntCtr, sc.cntCtr = zeroed(sc.cntCtr, nc), nil
	at.minAmt, sc.minAmt = zeroed(sc.minAmt, nc), nil
	at.inUse, sc.inUse = zeroed(sc.inUse, nd), nil
	at.cntSet, sc.cntSet = zeroed(sc.cntSet, ns), nil
	at.compat, sc.compat = zeroed(sc.compat, ns), nil
	for _, np := range at.pools {
		if np.h.baseline == nil {
			continue
		}
		copy(at.compat[np.setBase:], np.h.baseline)
	}
	if b := at.bufs; b != nil && len(at.claims) <= len(b.count) {
		at.claimCount = b.count[:len(at.claims)]
	} else {
		at.claimCount = make([]int, len(at.claims))
	}
}

// scratch holds the dense arrays and the lists of an attempt between
// Allocate calls: a scheduler allocates on many nodes per cycle, and
// allocating them anew each time costs more than the search on a node
// with free devices.
type scratch struct {
	base, used, minAmt    []uint64
	cntCtr, inUse, cntSet []int32
	compat                []compatState
	bufs                  attemptBufs
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// zeroed returns s with length n, all zero, reusing its array if it fits.
func zeroed[T any](s []T, n int32) []T {
	if int32(cap(s)) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// release hands the attempt's arrays back to its scratch, for the next
// attempt of the Allocate call that owns it; the attempt must not be used
// afterwards.
func (at *attempt) release() {
	if at == nil || at.scratch == nil {
		return
	}
	sc := at.scratch
	at.scratch = nil
	sc.base, sc.used, sc.cntCtr, sc.minAmt, sc.inUse, sc.cntSet, sc.compat = at.base, at.used, at.cntCtr, at.minAmt, at.inUse, at.cntSet, at.compat
	at.base, at.used, at.cntCtr, at.minAmt, at.inUse, at.cntSet, at.compat = nil, nil, nil, nil, nil, nil, nil
}

// busy is the in-use test upstream runs first: admin access may reuse
// devices held by other claims but not pick one twice for its own claim.
func (at *attempt) busy(al *alternative, c candidate, d *devInfo) bool {
	if al.admin {
		if d.multi {
			return false
		}
		for i := len(at.picks) - 1; i >= 0 && at.picks[i].al.claim == al.claim; i-- {
			if at.picks[i].c.local == c.local && !at.picks[i].c.d.multi {
				return true
			}
		}
		return false
	}
	return at.inUse[c.local] > 0 || (c.fromAll && at.pools[c.pool].h.allocated(d.idx))
}

func (at *attempt) skipCounters(c candidate, d *devInfo) bool {
	return d.multi && (at.pools[c.pool].h.shareInUse(d.idx) || at.shares[c.local] != nil)
}

// tryAdd runs the dynamic checks for one candidate in upstream's order and,
// when they pass, records it. The error is fatal.
func (at *attempt) tryAdd(al *alternative, c candidate) (bool, error) {
	a := at.a
	d := c.d
	if at.busy(al, c, d) {
		return false, nil
	}
	if c.err != nil {
		return false, c.err
	}
	sh := at.shares[c.local]
	if !c.fromAll && d.multi && sh != nil {
		fits, err := capacityFits(al.capReq, d.cap, at.pools[c.pool].h.aggCap(d.idx), sh.used, a.g.fractional)
		if err != nil {
			return false, at.fatal(al.claim, al.name, fmt.Errorf("checking capacity for device %s: %w", d.id(), err))
		}
		if !fits {
			return false, nil
		}
	}
	if c.fromAll {
		if ok, _ := at.usable(d); !ok {
			return false, nil
		}
	}
	np := &at.pools[c.pool]
	t, h := np.t, np.h
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
		if h.overcommitted {
			at.rollback(&pk)
			return false, nil
		}
		for _, u := range d.uses {
			// Never overflows: used never exceeds capacity.
			if u.amt > t.capacity[u.rel]-at.used[np.ctrBase+u.rel] {
				at.rollback(&pk)
				return false, nil
			}
		}
		for _, u := range d.uses {
			at.used[np.ctrBase+u.rel] += u.amt
		}
		pk.counters = true
	}
	if c.fromAll && at.blockedByTaint(al, d) {
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
			if c.fromAll {
				// Upstream: a claim whose constraint excludes part of
				// "all" devices is a mistake, not a misfit.
				return false, at.fatal(al.claim, al.name, fmt.Errorf("cannot add device %s because a claim constraint would not be satisfied", d.id()))
			}
			return false, nil
		}
		cs.add(v)
		pk.nCons++
	}
	if c.fromAll {
		var shared capMap
		if sh != nil {
			shared = sh.used
		}
		fits, err := at.staticCapacity(al, d, addCap(addCap(nil, h.aggCap(d.idx)), shared))
		if err != nil || !fits {
			at.rollback(&pk)
			if err != nil {
				return false, at.fatal(al.claim, al.name, fmt.Errorf("rechecking capacity for device %s: %w", d.id(), err))
			}
			return false, nil
		}
	}
	if d.multi {
		consumed, err := consumption(al.capReq, d.cap, a.g.fractional)
		if err != nil {
			at.rollback(&pk)
			return false, at.fatal(al.claim, al.name, fmt.Errorf("computing consumed capacity for device %s: %w", d.id(), err))
		}
		id := a.opts.NewShareID()
		pk.shareID = &id
		pk.consumed = consumed
		if sh == nil {
			if at.shares == nil {
				at.shares = map[int32]*shareState{}
			}
			sh = &shareState{}
			at.shares[c.local] = sh
		}
		sh.n++
		sh.used = addCap(sh.used, consumed)
	} else {
		at.inUse[c.local]++
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
		sh := at.shares[pk.c.local]
		sh.n--
		subCap(sh.used, pk.consumed)
		if sh.n == 0 {
			delete(at.shares, pk.c.local)
		}
	} else {
		at.inUse[pk.c.local]--
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
		np := &at.pools[pk.c.pool]
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

// solve satisfies requests ri.. in order. For a firstAvailable request the
// subrequests are tried in preference order, each with everything after it.
func (at *attempt) solve(ri int) (bool, error) {
	at.nodes++
	if ri > 0 && (ri == len(at.requests) || at.requests[ri].claim != at.requests[ri-1].claim) {
		// Upstream passes through a node for the end of the claim.
		at.nodes++
	}
	if ri == len(at.requests) {
		return true, nil
	}
	cr := &at.requests[ri]
	if at.overLimit(cr) {
		if cr.first {
			at.nodes += int64(len(cr.alternatives))
		}
		return false, errClaimLimit
	}
	if at.on(layerClaimLimit) && at.limitDoomed(ri) {
		return false, errClaimLimit
	}
	if !at.firstPass && at.hopeless(ri) {
		return false, nil
	}
	allOver := true
	for ai, al := range cr.alternatives {
		if cr.first {
			at.nodes++ // each subrequest is a node of its own
		}
		if al.all && len(al.candidates) == 0 {
			allOver = false
			continue
		}
		if at.claimCount[al.claim]+al.count > maxResults {
			continue
		}
		ok, err := at.fill(ri, al, at.order(al), 0, 0)
		if errors.Is(err, errClaimLimit) {
			continue
		}
		allOver = false
		if err != nil {
			return false, err
		}
		if ok {
			cr.chosen = ai
			return true, nil
		}
	}
	if allOver {
		return false, errClaimLimit
	}
	return false, nil
}

// overLimit: every alternative of the request asks for more devices than
// the claim has room for.
func (at *attempt) overLimit(cr *claimRequest) bool {
	for _, al := range cr.alternatives {
		if (al.all && len(al.candidates) == 0) || at.claimCount[al.claim]+al.count <= maxResults {
			return false
		}
	}
	return true
}

// fill picks device k of the alternative from order[pos:]. Devices of one request
// are tried as increasing combinations, as upstream does, so that no set of
// devices is tried twice.
func (at *attempt) fill(ri int, al *alternative, order []candidate, k, pos int) (bool, error) {
	if k > 0 {
		at.nodes++
	}
	at.steps++
	if at.steps&63 == 0 {
		if err := at.ctx.Err(); err != nil {
			return false, err
		}
	}
	if at.stepLimit > 0 && at.steps > at.stepLimit {
		return false, at.overBudget
	}
	if k == al.count {
		ok, err := at.solve(ri + 1)
		if errors.Is(err, errClaimLimit) && ri+1 < len(at.requests) && at.requests[ri+1].claim != al.claim {
			return false, nil
		}
		return ok, err
	}
	if at.firstPass && !al.all {
		return at.fillLazy(ri, al, k, pos)
	}
	if al.all {
		// Every device must be taken, in order: the first that does not
		// fit ends the request.
		return at.descend(ri, al, order, order[k], k, 0)
	}
	last := len(order) - 1
	// Upstream visits every remaining device even when too few are left,
	// and one of them may be an error it must report: only a request that
	// cannot fail fatally is bounded.
	if need := al.count - k; !al.mayFail && at.on(layerCombinationBound) {
		if len(order)-pos < need {
			return false, nil
		}
		if need > 1 && !at.boundOK(al, order[pos:], need) {
			return false, nil
		}
		last = len(order) - need
	}
	for i := pos; i <= last; i++ {
		if done, err := at.descend(ri, al, order, order[i], k, i+1); done || err != nil {
			return done, err
		}
	}
	return false, nil
}

// descend tries c as device k of the alternative and, when it fits,
// recurses to device k+1 from order[next:]; unless that succeeds, the
// pick is undone.
func (at *attempt) descend(ri int, al *alternative, order []candidate, c candidate, k, next int) (bool, error) {
	ok, err := at.tryAdd(al, c)
	if err != nil || !ok {
		return false, err
	}
	done, err := at.fill(ri, al, order, k+1, next)
	if err == nil && done {
		return true, nil
	}
	at.undo()
	return false, err
}
