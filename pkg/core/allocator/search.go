package allocator

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// attempt is one search on one node: the core (this file), the pruning
// layers it asks (prune, layers.go) and the strategy that orders
// candidates (config.strategy, strategy.go). One goroutine owns it.
type attempt struct {
	a   *Allocator
	ctx context.Context
	// deadline bounds the search when set (Plan.AllocateWithin).
	deadline time.Time
	node     *corev1.Node
	claims   []*resourcev1.ResourceClaim
	plan     []claimPlan
	pools    []nodePool
	// requests are the plan's requests on this node with their candidates
	// (candidates.go), in the order the search satisfies them; cons are
	// the running values of each claim's constraints.
	requests []claimRequest
	cons     [][]*constraintState // per claim

	st     searchState
	budget budget
	// lazy: the first pass, whose candidate lists are built only as far
	// as the search reaches (firstpass.go).
	lazy bool
	// nodes counts the nodes of the search tree in the units of upstream's
	// allocateOne calls (see Stats).
	nodes int64

	// prune is the pruning layers the core asks before it goes deeper;
	// it is &pruning, which holds their state (a wrapper around it in tests).
	prune   pruner
	pruning pruning

	// Where the arrays and lists come from (reuse.go): sc lends the dense
	// arrays, bufs (nil for probes and full passes after a first pass)
	// the lists of a one-request pod.
	sc   *scratch
	bufs *attemptBufs
}

// searchState is what the picks of the search hold, indexed by
// attempt-local indices (nodePool's bases). Every pick changes it and
// undo restores it.
type searchState struct {
	// base is per counter what held devices consume (heldGen.take); used
	// is that plus what picks consume, never above the counter's
	// capacity.
	base, used []uint64
	inUse      []int32       // per device: dedicated picks
	compat     []compatState // per counter set: running group intersection
	shares     map[int32]*shareState
	picks      []pick
	claimCount []int // per claim: its picks
}

// budget ends a search after limit steps (0: never) with over.
type budget struct {
	steps int
	limit int
	over  error
}

type shareState struct {
	n    int
	used capMap
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

// newAttempt starts, in at, a search of plan p on the node, with the
// arrays of sc and bufs (nil: none) for its lists; lazy is the first
// pass.
func (p *Plan) newAttempt(at *attempt, ctx context.Context, deadline time.Time, node *corev1.Node, pools []nodePool, lazy bool, sc *scratch, bufs *attemptBufs) *attempt {
	*at = attempt{a: p.a, ctx: ctx, deadline: deadline, node: node, claims: p.claims, plan: p.byClaim, pools: pools, lazy: lazy, sc: sc, bufs: bufs}
	at.init()
	return at
}

// probe starts a search of requests alone on a fresh state of at's node,
// for the pruning layers and explanations. Probes run one at a time, in
// the probe attempt of at's scratch; their arrays are left to the
// garbage collector.
func (at *attempt) probe(requests []claimRequest) *attempt {
	p := at.sc.probeAttempt()
	*p = attempt{a: at.a, ctx: at.ctx, deadline: at.deadline, node: at.node, claims: at.claims, plan: at.plan, pools: at.pools, cons: at.cons, requests: requests}
	p.init()
	return p
}

func (at *attempt) init() {
	if at.a.opts.stepBudget > 0 {
		at.budget = budget{limit: at.a.opts.stepBudget, over: errStepBudget}
	}
	at.pruning.at, at.pruning.off = at, at.a.opts.withoutLayers
	if at.lazy {
		at.pruning.off |= lazyOff
	}
	at.prune = &at.pruning
	if w := at.a.opts.wrapPruner; w != nil {
		at.prune = w(at, at.prune)
	}
}

// errStepBudget ends a search that took more than Options.stepBudget steps.
var errStepBudget = errors.New("search over step budget")

func (at *attempt) fatal(claim int, request string, err error) error {
	return &FatalError{Claim: claimName(at.claims[claim]), Request: request, Err: err}
}

// run builds the requests on the node and searches. The pruning layers
// start first (the infeasible-suffix probes of a full first-fit pass: a
// hard search is known by then, and the probes cost more than an easy
// search).
func (at *attempt) run() (bool, error) {
	// Sized first: building candidate lists reads what held devices
	// consume of counters (searchState.base).
	at.size()
	if err := at.nodeRequests(); err != nil {
		return false, err
	}
	if err := at.prune.start(); err != nil {
		return false, err
	}
	ok, err := at.solve(0)
	at.a.nodes.Add(at.nodes)
	if errors.Is(err, errClaimLimit) {
		ok, err = false, nil
	}
	return ok, err
}

// busy is the in-use test upstream runs first: admin access may reuse
// devices held by other claims but not pick one twice for its own claim.
func (at *attempt) busy(al *alternative, c candidate, d *devInfo) bool {
	if al.req.admin {
		if d.multi {
			return false
		}
		picks := at.st.picks
		for i := len(picks) - 1; i >= 0 && picks[i].al.req.claim == al.req.claim; i-- {
			if picks[i].c.local == c.local && !picks[i].c.d.multi {
				return true
			}
		}
		return false
	}
	h := at.pools[c.pool].h
	return at.st.inUse[c.local] > 0 || (c.fromAll && h.allocated(d.idx)) || at.heldShare(h, d)
}

// heldShare (ruleShareBlocksDedicated): d no longer allows multiple
// allocations, but an allocated claim still holds a share of it, which a
// dedicated pick must not be added to.
func (at *attempt) heldShare(h *heldGen, d *devInfo) bool {
	return at.a.rules.has(ruleShareBlocksDedicated) && !d.multi && h.shareInUse(d.idx)
}

func (at *attempt) skipCounters(c candidate, d *devInfo) bool {
	return d.multi && (at.pools[c.pool].h.shareInUse(d.idx) || at.st.shares[c.local] != nil)
}

// countersFit: the counters d consumes still have room for it.
func (at *attempt) countersFit(np *nodePool, d *devInfo) bool {
	for _, u := range d.uses {
		if u.amt > np.t.capacity[u.rel]-at.st.used[np.ctrBase+u.rel] {
			return false
		}
	}
	return true
}

// tryAdd runs the dynamic checks for one candidate in upstream's order and,
// when they pass, records it. The error is fatal.
func (at *attempt) tryAdd(al *alternative, c candidate) (bool, error) {
	a := at.a
	st := &at.st
	r := al.req
	d := c.d
	if at.busy(al, c, d) {
		return false, nil
	}
	if c.err != nil {
		return false, c.err
	}
	sh := st.shares[c.local]
	if !c.fromAll && d.multi && sh != nil {
		fits, err := capacityFits(r.capReq, d.cap, at.pools[c.pool].h.aggCap(d.idx), sh.used, a.capArith(d))
		if err != nil {
			return false, at.fatal(r.claim, r.name, fmt.Errorf("checking capacity for device %s: %w", d.id(), err))
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
				if !st.compat[ls].admits(cu.groups) {
					at.rollback(&pk)
					return false, nil
				}
				pk.compat = append(pk.compat, savedCompat{local: ls, prev: st.compat[ls]})
				st.compat[ls] = st.compat[ls].add(cu.groups)
			}
		}
		if h.overcommitted {
			at.rollback(&pk)
			return false, nil
		}
		for _, u := range d.uses {
			// Never overflows: used never exceeds capacity.
			if u.amt > t.capacity[u.rel]-st.used[np.ctrBase+u.rel] {
				at.rollback(&pk)
				return false, nil
			}
		}
		for _, u := range d.uses {
			st.used[np.ctrBase+u.rel] += u.amt
		}
		pk.counters = true
	}
	if c.fromAll && at.blockedByTaint(al, d) {
		at.rollback(&pk)
		return false, nil
	}
	for _, i := range r.applies {
		cs := at.cons[r.claim][i]
		v, err := at.attrFor(al, cs, d)
		if err != nil {
			at.rollback(&pk)
			return false, at.fatal(r.claim, r.name, err)
		}
		if !cs.admits(v) {
			at.rollback(&pk)
			if c.fromAll {
				// Upstream: a claim whose constraint excludes part of
				// "all" devices is a mistake, not a misfit.
				return false, at.fatal(r.claim, r.name, fmt.Errorf("cannot add device %s because a claim constraint would not be satisfied", d.id()))
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
				return false, at.fatal(r.claim, r.name, fmt.Errorf("rechecking capacity for device %s: %w", d.id(), err))
			}
			return false, nil
		}
	}
	if d.multi {
		consumed, err := consumption(r.capReq, d.cap, a.capArith(d))
		if err != nil {
			at.rollback(&pk)
			return false, at.fatal(r.claim, r.name, fmt.Errorf("computing consumed capacity for device %s: %w", d.id(), err))
		}
		id := a.opts.NewShareID()
		pk.shareID = &id
		pk.consumed = consumed
		if sh == nil {
			if st.shares == nil {
				st.shares = map[int32]*shareState{}
			}
			sh = &shareState{}
			st.shares[c.local] = sh
		}
		sh.n++
		sh.used = addCap(sh.used, consumed)
	} else {
		st.inUse[c.local]++
	}
	st.picks = append(st.picks, pk)
	st.claimCount[r.claim]++
	return true, nil
}

// undo removes the last pick.
func (at *attempt) undo() {
	st := &at.st
	pk := &st.picks[len(st.picks)-1]
	d := pk.c.d
	if d.multi {
		sh := st.shares[pk.c.local]
		sh.n--
		subCap(sh.used, pk.consumed)
		if sh.n == 0 {
			delete(st.shares, pk.c.local)
		}
	} else {
		st.inUse[pk.c.local]--
	}
	st.claimCount[pk.al.req.claim]--
	at.rollback(pk)
	st.picks = st.picks[:len(st.picks)-1]
}

// rollback reverts constraints, group intersections and counters.
func (at *attempt) rollback(pk *pick) {
	r := pk.al.req
	cons := at.cons[r.claim]
	for j := pk.nCons - 1; j >= 0; j-- {
		cons[r.applies[j]].remove()
	}
	pk.nCons = 0
	for j := len(pk.compat) - 1; j >= 0; j-- {
		at.st.compat[pk.compat[j].local] = pk.compat[j].prev
	}
	pk.compat = nil
	if pk.counters {
		np := &at.pools[pk.c.pool]
		for _, u := range pk.c.d.uses {
			at.st.used[np.ctrBase+u.rel] -= u.amt
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
	if at.prune.claimDoomed(ri) {
		return false, errClaimLimit
	}
	if at.prune.hopeless(ri) {
		return false, nil
	}
	allOver := true
	for ai, al := range cr.alternatives {
		if cr.first {
			at.nodes++ // each subrequest is a node of its own
		}
		if al.req.all && len(al.candidates) == 0 {
			allOver = false
			continue
		}
		if at.st.claimCount[al.req.claim]+al.count() > maxResults {
			continue
		}
		ok, err := at.fill(ri, al, at.a.strategy.order(at, al), 0, 0)
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
		if (al.req.all && len(al.candidates) == 0) || at.st.claimCount[al.req.claim]+al.count() <= maxResults {
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
	b := &at.budget
	b.steps++
	if b.steps&63 == 0 {
		if err := at.ctx.Err(); err != nil {
			return false, err
		}
		if !at.deadline.IsZero() && time.Now().After(at.deadline) {
			return false, context.DeadlineExceeded
		}
	}
	if b.limit > 0 && b.steps > b.limit {
		return false, b.over
	}
	count := al.count()
	if k == count {
		ok, err := at.solve(ri + 1)
		if errors.Is(err, errClaimLimit) && ri+1 < len(at.requests) && at.requests[ri+1].claim != al.req.claim {
			return false, nil
		}
		return ok, err
	}
	if al.req.all {
		// Every device must be taken, in order: the first that does not
		// fit ends the request.
		return at.descend(ri, al, order, order[k], k, 0)
	}
	if at.lazy {
		return at.fillLazy(ri, al, k, pos)
	}
	for i, last := pos, at.prune.lastStart(al, order, pos, count-k); i <= last; i++ {
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
