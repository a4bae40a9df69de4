package allocator

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// Memory reuse, all of it in this file (doc.go has the rule): a
// scheduler plans once per pod and allocates on every node, so what a
// plan and an Allocate call would allocate for the common pod (one claim,
// one request, one pool on the node, one device picked) is cut from
// arrays that are inline in an object already paid for, or lent by a
// pool of scratch between calls. Nothing lent outlives the call that
// borrowed it: results and explanations copy what they keep.

// planInline holds the plan of a pod with one claim of one request (most
// pods), so that planning it allocates nothing beyond the Plan.
type planInline struct {
	plan  [1]claimPlan
	rps   [1]reqPlan
	rptrs [1]*request
	reqs  [1]request
}

// planArena is what is left of the arrays the plan's slices are cut from,
// sized for the claims' requests.
type planArena struct {
	rps   []reqPlan
	rptrs []*request
	reqs  []request
}

// take returns an empty slice with room for n elements cut from *free,
// which must have that room.
func take[T any](free *[]T, n int) []T {
	s := (*free)[:0:n]
	*free = (*free)[n:]
	return s
}

// nextRequest returns the next request of the arena, which is zero.
func (free *planArena) nextRequest() *request {
	r := &free.reqs[0]
	free.reqs = free.reqs[1:]
	return r
}

// arena sizes the plan's per-claim array and free's arrays for the
// claims' requests and subrequests, inline when they fit.
func (p *Plan) arena(claims []*resourcev1.ResourceClaim, free *planArena) {
	nr, na := 0, 0
	for _, claim := range claims {
		if claim == nil {
			continue
		}
		for _, req := range claim.Spec.Devices.Requests {
			nr++
			na += max(1, len(req.FirstAvailable))
		}
	}
	in := &p.inline
	if len(claims) <= len(in.plan) {
		p.byClaim = in.plan[:len(claims)]
	} else {
		p.byClaim = make([]claimPlan, len(claims))
	}
	if nr <= len(in.rps) {
		free.rps = in.rps[:]
	} else {
		free.rps = make([]reqPlan, nr)
	}
	if na <= len(in.reqs) {
		free.rptrs, free.reqs = in.rptrs[:], in.reqs[:]
	} else {
		free.rptrs, free.reqs = make([]*request, na), make([]request, na)
	}
}

// exprInline holds a request's expressions when they are few (a class
// and a request selector, typically).
type exprInline [2]*exprEntry

// slice returns an empty slice with room for n expressions.
func (b *exprInline) slice(n int) []*exprEntry {
	if n <= len(b) {
		return b[:0]
	}
	return make([]*exprEntry, 0, n)
}

// altInline holds an alternative's first candidate (often the only one
// looked at) and, for the one table a node usually sees, its selector
// columns.
type altInline struct {
	cands [1]candidate
	cols  [1]tableCols
	sels  [4]*selColumn
}

// candidates returns an empty candidate list.
func (b *altInline) candidates() []candidate { return b.cands[:0] }

// tables returns an empty list of tables' columns.
func (b *altInline) tables() []tableCols { return b.cols[:0] }

// selCols returns n selector columns, inline for the first table.
func (b *altInline) selCols(first bool, n int) []*selColumn {
	if first && n <= len(b.sels) {
		return b.sels[:n]
	}
	return make([]*selColumn, n)
}

// scratch holds the attempts of an Allocate call, their dense arrays and
// their lists between Allocate calls: a scheduler allocates on many nodes
// per cycle, and allocating them anew each time costs more than the
// search on a node with free devices. The core's arrays and the bounds'
// are lent to one attempt at a time (size) and given back (release).
type scratch struct {
	base, used, minAmt    []uint64
	cntCtr, inUse, cntSet []int32
	compat                []compatState
	bufs                  attemptBufs
	// passes are the first and the full pass, probe the probe running
	// (attempt.probe). An attempt hands itself to its layers and its
	// strategy, which are interfaces, so it cannot live on the stack.
	passes [2]attempt
	probe  *attempt
}

// probeAttempt returns the attempt probes run in, made on first use: most
// Allocate calls run none.
func (sc *scratch) probeAttempt() *attempt {
	if sc.probe == nil {
		sc.probe = new(attempt)
	}
	return sc.probe
}

// scratchPool lends scratch to Allocate calls: the scheduler's parallel
// Filter runs one per node at a time, so a pool, not a lock, lets each
// goroutine reuse another call's arrays without sharing them.
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

// size borrows the attempt's dense arrays from its scratch, sized for
// its pools, and starts the counters from what held devices consume.
func (at *attempt) size() {
	var nd, nc, ns int32
	for _, np := range at.pools {
		nd += np.t.nDevs
		nc += int32(len(np.t.capacity))
		ns += int32(len(np.t.sets))
	}
	sc := at.sc
	if sc == nil {
		// A probe: its arrays are left to the garbage collector.
		sc = scratchPool.Get().(*scratch)
		at.sc = sc
	}
	st, b := &at.st, &at.pruning
	st.base, sc.base = zeroed(sc.base, nc), nil
	for _, np := range at.pools {
		copy(st.base[np.ctrBase+np.h.takeLo:], np.h.take)
	}
	st.used, sc.used = zeroed(sc.used, nc), nil
	copy(st.used, st.base)
	b.cntCtr, sc.cntCtr = zeroed(sc.cntCtr, nc), nil
	b.minAmt, sc.minAmt = zeroed(sc.minAmt, nc), nil
	st.inUse, sc.inUse = zeroed(sc.inUse, nd), nil
	b.cntSet, sc.cntSet = zeroed(sc.cntSet, ns), nil
	st.compat, sc.compat = zeroed(sc.compat, ns), nil
	for _, np := range at.pools {
		if np.h.baseline == nil {
			continue
		}
		copy(st.compat[np.setBase:], np.h.baseline)
	}
	st.claimCount = at.bufs.claimCount(len(at.claims))
}

// release hands the attempt's arrays back to its scratch, for the next
// attempt of the Allocate call that owns it; the attempt must not be used
// afterwards.
func (at *attempt) release() {
	if at == nil || at.sc == nil {
		return
	}
	sc := at.sc
	at.sc = nil
	st, b := &at.st, &at.pruning
	sc.base, sc.used, sc.cntCtr, sc.minAmt, sc.inUse, sc.cntSet, sc.compat = st.base, st.used, b.cntCtr, b.minAmt, st.inUse, b.cntSet, st.compat
	st.base, st.used, b.cntCtr, b.minAmt, st.inUse, b.cntSet, st.compat = nil, nil, nil, nil, nil, nil, nil
	// The attempts stay in the scratch: they must not keep the caller's
	// context alive.
	at.ctx = nil
	if sc.probe != nil {
		sc.probe.ctx = nil
	}
}

// attemptBufs hold an attempt's lists for the common pod and node (one
// claim of one request, one pool on the node, one device picked) in one
// allocation; longer lists grow out of them as usual. A nil
// *attemptBufs lends nothing.
type attemptBufs struct {
	pools [1]nodePool
	reqs  [1]claimRequest
	alts  [1]*alternative
	alt   alternative
	cons  [1][]*constraintState
	picks [1]pick
	count [1]int
	// altUsed: alt holds an alternative.
	altUsed bool
}

// reset readies the lists for the next Allocate call. Only what is read
// before it is written again is cleared: clearing all of them costs a
// write barrier per pointer while the collector runs, and what they
// still point to is at most the pods and pools of a recent call.
func (b *attemptBufs) reset() {
	b.cons[0] = nil
	clear(b.count[:])
	b.altUsed = false
}

// nodePools returns an empty list of pools on the node.
func (b *attemptBufs) nodePools() []nodePool {
	if b == nil {
		return nil
	}
	return b.pools[:0]
}

// lists returns the per-claim constraint lists and empty lists of
// requests and picks.
func (b *attemptBufs) lists(claims int) ([][]*constraintState, []claimRequest, []pick) {
	if b == nil || claims > len(b.cons) {
		return make([][]*constraintState, claims), nil, nil
	}
	return b.cons[:claims], b.reqs[:0], b.picks[:0]
}

// alternatives returns an empty list for n alternatives of the first
// request, nil for others.
func (b *attemptBufs) alternatives(firstRequest bool, n int) []*alternative {
	if b == nil || !firstRequest || n > len(b.alts) {
		return nil
	}
	return b.alts[:0]
}

// alternative returns a zero alternative.
func (b *attemptBufs) alternative() *alternative {
	if b == nil || b.altUsed {
		return new(alternative)
	}
	b.altUsed = true
	return &b.alt
}

// claimCount returns a zero count per claim.
func (b *attemptBufs) claimCount(claims int) []int {
	if b == nil || claims > len(b.count) {
		return make([]int, claims)
	}
	return b.count[:claims]
}

// resultBlock holds the result of one claim with one device, and its
// node selector when it pins the claim to the node, in one allocation: a
// scheduler builds results for every node that fits.
type resultBlock struct {
	out   [1]*resourcev1.AllocationResult
	block [1]resourcev1.AllocationResult
	devs  [1]resourcev1.DeviceRequestAllocationResult
	pin   pinned
}

// pinned is a node selector for one node by name, in one piece.
type pinned struct {
	sel  corev1.NodeSelector
	term [1]corev1.NodeSelectorTerm
	req  [1]corev1.NodeSelectorRequirement
	vals [1]string
}

// to fills p as the selector for the named node alone and returns it.
func (p *pinned) to(node string) *corev1.NodeSelector {
	p.vals[0] = node
	p.req[0] = corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: p.vals[:]}
	p.term[0].MatchFields = p.req[:]
	p.sel.NodeSelectorTerms = p.term[:]
	return &p.sel
}

// useArena holds the counter uses of a generation's device entries in
// one array, so that an entry usually costs no allocation of its own.
type useArena []counterUse

// mark is where the uses of the next entry start.
func (a *useArena) mark() int { return len(*a) }

func (a *useArena) add(u counterUse) { *a = append(*a, u) }

// since returns the uses added from mark start on, nil for none. Later
// appends may move the arena; an entry keeps the array it saw.
func (a *useArena) since(start int) []counterUse {
	if len(*a) == start {
		return nil
	}
	return (*a)[start:len(*a):len(*a)]
}

// alloc sizes the bitsets and the counter window for the results, in one
// block: a claim delta derives them again.
func (h *heldGen) alloc(t *genTable, held []*resourcev1.DeviceRequestAllocationResult) {
	dedicated, shared := false, false
	lo, hi := int32(len(t.capacity)), int32(0)
	for _, r := range held {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		for _, nd := range t.named(r.Device) {
			dedicated = dedicated || r.ShareID == nil
			shared = shared || r.ShareID != nil
			if !nd.counters {
				continue
			}
			if d := t.dev(nd.idx); !t.slices[d.slice].counters && len(d.uses) > 0 {
				// Uses are sorted by counter.
				lo, hi = min(lo, d.uses[0].rel), max(hi, d.uses[len(d.uses)-1].rel+1)
			}
		}
	}
	words := int((t.nDevs + 63) / 64)
	n := max(0, int(hi-lo))
	if dedicated {
		n += words
	}
	if shared {
		n += words
	}
	if n == 0 {
		return
	}
	block := make([]uint64, n)
	if dedicated {
		h.dedicated, block = bitset(block[:words:words]), block[words:]
	}
	if shared {
		h.shared, block = bitset(block[:words:words]), block[words:]
	}
	if lo < hi {
		h.takeLo, h.take = lo, block
	}
}
