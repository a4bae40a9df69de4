package allocator

import (
	"fmt"
	"slices"

	"github.com/dractl/dractl/pkg/core/features"
)

// claimRequest is one request of a claim, in the order the search
// satisfies them: by one of its alternatives, the request itself or, for a
// firstAvailable request, one of its subrequests in preference order.
type claimRequest struct {
	claim        int
	alternatives []*alternative
	// first: a firstAvailable request, whose subrequests are the alternatives.
	first bool
	// chosen is the alternative that succeeded.
	chosen int
}

// alternative is one planned request (the request itself or one of its
// firstAvailable subrequests) on one node, during one Allocate call: its
// candidate devices there and what rejected the others. What does not
// depend on the node is read from req, never copied.
type alternative struct {
	req *request
	// riskyCands: a candidate failed evaluation, or is a shared device
	// whose capacity arithmetic can fail (see mayFail).
	riskyCands bool
	candidates []candidate
	scan       scanCursor // how far candidates are built
	rej        [numReasons]int
	ctrRej     map[string]int
	// taintRej: explain only, the untolerated taint of each device
	// rejected for one.
	taintRej map[string]string
	// cols are the selector columns of each table the alternative met.
	cols   []tableCols
	inline altInline // reuse.go
}

// count is the number of devices to pick: the request's, or for "All"
// every candidate.
func (al *alternative) count() int {
	if al.req.all {
		return len(al.candidates)
	}
	return al.req.count
}

// want is count as the request states it, for messages: count is capped
// just above the claim limit.
func (al *alternative) want() int64 {
	if al.req.all {
		return int64(len(al.candidates))
	}
	return al.req.want
}

// mayFail: trying the alternative can end in a fatal error (the request
// says so whatever the node, or one of its candidates does), so the
// search must not prune past it.
func (al *alternative) mayFail() bool { return al.req.mayFail || al.riskyCands }

type tableCols struct {
	t   *genTable
	sel []*selColumn
}

// selCols returns the table's result columns of the alternative's expressions.
func (al *alternative) selCols(t *genTable) []*selColumn {
	for i := range al.cols {
		if al.cols[i].t == t {
			return al.cols[i].sel
		}
	}
	exprs := al.req.exprs
	cols := al.inline.selCols(len(al.cols) == 0, len(exprs))
	for i, e := range exprs {
		cols[i] = t.selColumn(e)
	}
	if al.cols == nil {
		al.cols = al.inline.tables()
	}
	al.cols = append(al.cols, tableCols{t: t, sel: cols})
	return cols
}

// candidate is a device that passed the static checks for an alternative. err is set
// when evaluating the device failed; the search reports it when it reaches
// the device, which is when upstream would have evaluated it.
type candidate struct {
	d *devInfo
	// local is the device's index among the devices of all the attempt's
	// pools (nodePool.devBase plus its index in the pool); it indexes the
	// attempt's per-device state.
	local int32
	pool  int32 // index into attempt.pools
	err   error
	// fromAll: a device of upstream's "all devices" list, for which every
	// dynamic and static check runs at pick time.
	fromAll bool
}

// nodeRequests turns the plan into the claim requests on this node, in
// upstream's order (per claim: per request each alternative, then the
// claim limit; then the constraints), reporting the first problem on the
// way.
func (at *attempt) nodeRequests() error {
	a := at.a
	at.cons, at.requests, at.st.picks = at.bufs.lists(len(at.claims))
	for ci := range at.plan {
		cp := &at.plan[ci]
		if cp.err != nil {
			return cp.err
		}
		minDevices := 0
		for _, rp := range cp.reqs {
			if rp.err != nil {
				return rp.err
			}
			cr := claimRequest{claim: ci, first: rp.first, alternatives: at.bufs.alternatives(len(at.requests) == 0, len(rp.reqs))}
			least := -1
			var want int64
			for _, r := range rp.reqs {
				if r.err != nil {
					return r.err
				}
				al, err := at.newAlt(r)
				if err != nil {
					return err
				}
				cr.alternatives = append(cr.alternatives, al)
				if n := al.count(); least < 0 || n < least {
					least, want = n, al.want()
				}
			}
			// Upstream's words, with the request's own count.
			if least > maxResults-minDevices {
				name := rp.reqs[0].name
				if rp.first {
					name = rp.reqs[0].parent
				}
				return at.fatal(ci, name, fmt.Errorf("adding %d devices exceeds the claim limit of %d, with %d already accounted for", want, maxResults, minDevices))
			}
			minDevices += least
			at.requests = append(at.requests, cr)
		}
		if cp.consErr != nil {
			return cp.consErr
		}
		for _, con := range cp.cons {
			at.cons[ci] = append(at.cons[ci], &constraintState{match: con.match, name: con.attr, names: con.names, lists: a.g.listAttrs,
				listErr: a.rules.has(ruleListValueWithoutGate), noBuild: a.rules.has(ruleVersionIgnoresBuild)})
		}
	}
	return nil
}

// newAlt starts the request's alternative on this node: for "All", every device it
// must take.
func (at *attempt) newAlt(r *request) (*alternative, error) {
	al := at.bufs.alternative()
	*al = alternative{req: r}
	al.candidates = al.inline.candidates()
	if !r.all {
		if at.lazy {
			// The first pass looks at devices as the search reaches them.
			return al, nil
		}
		at.finishAlt(al)
		return al, nil
	}
	if err := at.buildAll(al); err != nil {
		return nil, err
	}
	return al, nil
}

// finishAlt completes the candidate list and decides riskyCands. Capacity
// arithmetic of "All" candidates already ran without error in buildAll
// and is static, so only a claim constraint can make them fail fatally,
// which the request says.
func (at *attempt) finishAlt(al *alternative) {
	if al.req.all {
		return
	}
	at.buildCands(al, false)
	for _, c := range al.candidates {
		if c.err != nil || (c.d.multi && al.req.capReq != nil) {
			al.riskyCands = true
			break
		}
	}
}

// selectable runs the class selectors, the request selectors and the
// per-device node selection, in upstream's order. With binding conditions
// off, a device that has them is never selectable.
func (at *attempt) selectable(al *alternative, d *devInfo) (bool, Reason, error) {
	a := at.a
	if !a.g.bindingConditions && d.bindingConds {
		return false, ReasonFeatureGate, nil
	}
	var cols []*selColumn
	if len(al.req.exprs) > 0 {
		cols = al.selCols(d.t)
	}
	for i, e := range al.req.exprs {
		ok, err := eval(at.ctx, e, cols[i], d)
		if err != nil {
			if i < al.req.nClass {
				return false, 0, at.fatal(al.req.claim, al.req.name, fmt.Errorf("class %s: selector #%d (%q) on device %s: CEL error: %w", al.req.class.Name, i, e.expr, d.id(), err))
			}
			return false, 0, at.fatal(al.req.claim, al.req.name, fmt.Errorf("selector #%d (%q) on device %s: CEL error: %w", i-al.req.nClass, e.expr, d.id(), err))
		}
		if !ok {
			if i < al.req.nClass {
				return false, ReasonDriverOrClass, nil
			}
			return false, ReasonSelector, nil
		}
	}
	if d.sliceInfo().perDevice {
		ok, err := d.node.matches(at.node)
		if err != nil {
			return false, 0, at.fatal(al.req.claim, al.req.name, err)
		}
		if !ok {
			return false, ReasonNode, nil
		}
	}
	return true, 0, nil
}

// usable are upstream's per-device checks of allocateDevice that do not
// depend on what else is picked: node operations and, with
// DRAPartitionableDevices off, counter consumption.
func (at *attempt) usable(d *devInfo) (bool, Reason) {
	g := &at.a.g
	if d.sliceInfo().skipNodeOps {
		if !g.nodeOps {
			return false, ReasonFeatureGate
		}
		if !slices.Contains(at.node.Status.DeclaredFeatures, features.NodeFeatureOptionalNodeOperations) {
			return false, ReasonNodeOperations
		}
	}
	if !g.partitionable && d.consumes {
		return false, ReasonFeatureGate
	}
	return true, 0
}

// staticCapacity checks the request's capacity against the device on top
// of used; without DRAConsumableCapacity capacity is not looked at.
func (at *attempt) staticCapacity(al *alternative, d *devInfo, used capMap) (bool, error) {
	if !at.a.g.consumable {
		return true, nil
	}
	if d.cap == nil {
		return al.req.capReq == nil || len(al.req.capReq.Requests) == 0, nil
	}
	if al.req.capReq == nil && len(used) == 0 {
		return d.alone, d.aloneErr
	}
	return capacityFits(al.req.capReq, d.cap, used, nil, at.a.capArith(d))
}

// buildCands lists, in upstream's visiting order, the devices that can serve
// the alternative on their own, counting every other device under its reason.
func (at *attempt) buildCands(al *alternative, explainOnly bool) {
	for at.scanOne(al, explainOnly) {
	}
}

// scanCursor is how far buildCands has looked: pool, slice of the pool,
// pool-local device.
type scanCursor struct {
	np, sl int
	dev    int32
	begun  bool
	done   bool
}

// more extends al.candidates by at least one candidate, looking at no more
// devices than that takes; false when no device is left.
func (at *attempt) more(al *alternative) bool {
	n := len(al.candidates)
	for len(al.candidates) == n {
		if !at.scanOne(al, false) {
			return false
		}
	}
	return true
}

// scanOne looks at the device under the cursor (a whole slice of an
// unusable pool) and advances; false once everything was seen.
func (at *attempt) scanOne(al *alternative, explainOnly bool) bool {
	cur := &al.scan
	for !cur.done {
		if cur.np >= len(at.pools) {
			cur.done = true
			break
		}
		np := &at.pools[cur.np]
		if cur.sl >= len(np.slices) {
			cur.np, cur.sl, cur.begun = cur.np+1, 0, false
			continue
		}
		s := &np.t.slices[np.slices[cur.sl]]
		if !cur.begun {
			cur.dev, cur.begun = s.devStart, true
		}
		if np.incomplete || np.invalid != nil {
			r := ReasonIncompletePool
			if np.invalid != nil {
				r = ReasonInvalidPool
			}
			al.rej[r] += int(s.devEnd - s.devStart)
			cur.sl, cur.begun = cur.sl+1, false
			return true
		}
		if cur.dev >= s.devEnd {
			cur.sl, cur.begun = cur.sl+1, false
			continue
		}
		i := cur.dev
		cur.dev++
		at.scanDev(al, np, int32(cur.np), i, explainOnly)
		return true
	}
	return false
}

func (at *attempt) scanDev(al *alternative, np *nodePool, npi, i int32, explainOnly bool) {
	d := np.t.dev(i)
	c := candidate{d: d, local: np.devBase + i, pool: npi}
	if !al.req.admin && (np.h.allocated(i) || at.heldShare(np.h, d)) {
		al.rej[ReasonAllocated]++
		return
	}
	ok, reason, err := at.selectable(al, d)
	if err != nil {
		if !explainOnly {
			c.err = err
			al.candidates = append(al.candidates, c)
		}
		return
	}
	if !ok {
		al.rej[reason]++
		return
	}
	fits, err := at.staticCapacity(al, d, np.h.aggCap(i))
	if err != nil {
		if !explainOnly {
			c.err = at.fatal(al.req.claim, al.req.name, fmt.Errorf("checking capacity for device %s: %w", d.id(), err))
			al.candidates = append(al.candidates, c)
		}
		return
	}
	if !fits {
		al.rej[ReasonCapacity]++
		return
	}
	if ok, reason := at.usable(d); !ok {
		al.rej[reason]++
		return
	}
	if at.blockedByTaint(al, d) {
		al.rej[ReasonTaint]++
		if explainOnly {
			if al.taintRej == nil {
				al.taintRej = map[string]string{}
			}
			al.taintRej[d.id()] = taintString(blockingTaint(d.d.Taints, al.req.tols))
		}
		return
	}
	if bad := at.counterMisfitAlone(d, np); bad >= 0 {
		al.rej[ReasonCounterExhausted]++
		if explainOnly {
			if al.ctrRej == nil {
				al.ctrRej = map[string]int{}
			}
			al.ctrRej[np.t.counterName(bad)]++
		}
		return
	}
	if !explainOnly {
		al.candidates = append(al.candidates, c)
	}
}

// counterMisfitAlone returns the pool-relative index of the first counter
// the device cannot get even if nothing else were picked, -1 when it fits.
func (at *attempt) counterMisfitAlone(d *devInfo, np *nodePool) int32 {
	h := np.h
	if len(d.uses) == 0 || (d.multi && h.shareInUse(d.idx)) {
		return -1
	}
	for _, u := range d.uses {
		if u.amt > np.t.capacity[u.rel]-at.st.base[np.ctrBase+u.rel] {
			return u.rel
		}
	}
	if h.overcommitted {
		return h.over[0]
	}
	return -1
}

// poolError is the error of an "All" request that cannot know all devices
// of a pool the node sees: the pod's (1.37) or the node's
// (ruleAllPoolsNodeLocal).
func (at *attempt) poolError(al *alternative, err error) error {
	if at.a.rules.has(ruleAllPoolsNodeLocal) {
		return &NodeError{Node: at.node.Name, Claim: claimName(at.claims[al.req.claim]), Request: al.req.name, Err: err}
	}
	return at.fatal(al.req.claim, al.req.name, err)
}

// buildAll is upstream's list for allocationMode All: every device of every
// considered pool that the selectors and node select and whose capacity
// could hold the request on an unused device. The pools must all be usable.
func (at *attempt) buildAll(al *alternative) error {
	for _, np := range at.pools {
		id := np.t.p.ID
		if np.incomplete {
			return at.poolError(al, fmt.Errorf("asks for all devices, but resource pool %s is currently being updated", id))
		}
		if np.invalid != nil {
			return at.poolError(al, fmt.Errorf("asks for all devices, but resource pool %s is currently invalid: %w", id, np.invalid))
		}
	}
	for npi := range at.pools {
		np := &at.pools[npi]
		for _, si := range np.slices {
			s := &np.t.slices[si]
			for i := s.devStart; i < s.devEnd; i++ {
				d := np.t.dev(i)
				ok, _, err := at.selectable(al, d)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				fits, err := at.staticCapacity(al, d, nil)
				if err != nil {
					return at.fatal(al.req.claim, al.req.name, fmt.Errorf("checking capacity for device %s: %w", d.id(), err))
				}
				if !fits {
					continue
				}
				al.candidates = append(al.candidates, candidate{d: d, local: np.devBase + i, pool: int32(npi), fromAll: true})
			}
		}
	}
	return nil
}
