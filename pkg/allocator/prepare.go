package allocator

import (
	"errors"
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/api"
)

// maxResults is the API's limit on devices per claim allocation.
const maxResults = resourcev1.AllocationResultsMaxSize

// nodeOperationsFeature is what a node declares in status.declaredFeatures
// when it can skip node operations (DRAOptionalNodeOperations).
const nodeOperationsFeature = "DRAOptionalNodeOperations"

// request is one way to satisfy a request of a claim, as far as it does
// not depend on the node: the request itself or one subrequest of a
// firstAvailable request, with its class, compiled selectors and shape.
// Claims decides it once; every Allocate call reads it.
type request struct {
	claim  int
	name   string // as written into results: "req" or "req/sub"
	parent string // request name when this is a subrequest
	class  *resourcev1.DeviceClass
	exprs  []*exprEntry // class selectors, then request selectors
	nClass int
	// exprBuf holds exprs when they are few (a class and a request
	// selector, typically).
	exprBuf [2]*exprEntry
	admin   bool
	all     bool
	// mayFail: trying it can end in a fatal error whatever the node: a
	// constraint reads a derived attribute, or an "All" request is
	// constrained.
	mayFail bool
	// count and want are those of an ExactCount request (see alternative).
	count  int
	want   int64
	tols   []resourcev1.DeviceToleration
	capReq *resourcev1.CapacityRequirements
	// derived are the request's derived attributes by name: constraints
	// read these instead of the device's own attributes.
	derived map[string]*derivedEntry
	applies []int // indices of the claim's constraints that cover this request
	// err: preparing the request failed; Allocate reports it when it
	// reaches the request, as upstream does.
	err error
}

// alternative is one way to satisfy a request during one Allocate call
// (the request itself or one of its firstAvailable subrequests) with its
// candidate devices on the node.
type alternative struct {
	*request
	// count is the number of devices to pick; want is the count as the
	// request states it, for messages (count is capped just above the
	// claim limit). For "All" both are the number of candidates.
	count int
	want  int64
	// mayFail: trying this alternative can end in a fatal error (a candidate that
	// failed evaluation, an "All" request, a shared device whose capacity
	// arithmetic can fail), so the search must not prune past it.
	mayFail    bool
	candidates []candidate
	cands      [1]candidate // the first candidate: often the only one looked at
	scan       scanCursor   // how far candidates are built
	rej        [numReasons]int
	ctrRej     map[string]int
	// cols are the selector columns of each table the alternative met; a node
	// usually sees one pool, whose columns fit in buf.
	cols []tableCols
	buf  [1]tableCols
	sels [4]*selColumn
}

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
	var cols []*selColumn
	if len(al.cols) == 0 && len(al.exprs) <= len(al.sels) {
		cols = al.sels[:len(al.exprs)]
	} else {
		cols = make([]*selColumn, len(al.exprs))
	}
	for i, e := range al.exprs {
		cols[i] = t.selColumn(e)
	}
	if al.cols == nil {
		al.cols = al.buf[:0]
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

func claimName(c *resourcev1.ResourceClaim) string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

func (at *attempt) fatal(claim int, request string, err error) error {
	return &FatalError{Claim: claimName(at.claims[claim]), Request: request, Err: err}
}

// Claims are the claims of one pod prepared for allocation: classes
// looked up, selectors compiled, requests checked against the feature
// gates. A scheduler prepares them once per scheduling cycle and then asks
// for many nodes, from many goroutines at once; each Allocate does only
// the work that depends on the node.
type Claims struct {
	a      *Allocator
	claims []*resourcev1.ResourceClaim
	plan   []claimPlan
	// inline holds the plan of a pod with one claim of one request (most
	// pods), so that preparing them is one allocation.
	inline struct {
		plan  [1]claimPlan
		rps   [1]reqPlan
		rptrs [1]*request
		reqs  [1]request
	}
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

// claimPlan is one claim's requests in order, up to the first that cannot
// be prepared.
type claimPlan struct {
	err  error // a nil claim
	reqs []reqPlan
	cons []consPlan
	// consErr: a constraint that cannot be used; reported after the
	// requests, as upstream checks constraints after them.
	consErr error
}

type reqPlan struct {
	err   error // a gate or request type problem, before any alternative
	first bool
	reqs  []*request // up to and including the first with err
}

type consPlan struct {
	match bool
	attr  string
	names []string
}

// Prepare prepares the claims of one pod, which are allocated together.
// Problems that no node can fix are reported by Allocate, in the order
// upstream meets them.
func (a *Allocator) Prepare(claims []*resourcev1.ResourceClaim) *Claims {
	c := new(Claims)
	a.PrepareInto(c, claims)
	return c
}

// PrepareInto is Prepare into c, which must be the zero Claims and not be
// copied afterwards: for a caller that keeps the Claims in an object of
// its own per scheduling cycle and so saves their allocation.
func (a *Allocator) PrepareInto(c *Claims, claims []*resourcev1.ResourceClaim) {
	c.a, c.claims = a, claims
	var free planArena
	c.arena(claims, &free)
	for ci, claim := range claims {
		cp := &c.plan[ci]
		if claim == nil {
			cp.err = &FatalError{Err: errors.New("nil claim")}
			break
		}
		if !c.planClaim(ci, claim, cp, &free) {
			break
		}
	}
}

// arena sizes the arrays for the claims' requests and subrequests.
func (c *Claims) arena(claims []*resourcev1.ResourceClaim, free *planArena) {
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
	in := &c.inline
	if len(claims) <= len(in.plan) {
		c.plan = in.plan[:len(claims)]
	} else {
		c.plan = make([]claimPlan, len(claims))
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

// planClaim fills cp; false when preparing stopped at an error.
func (c *Claims) planClaim(ci int, claim *resourcev1.ResourceClaim, cp *claimPlan, free *planArena) bool {
	a := c.a
	fatal := func(request string, err error) error {
		return &FatalError{Claim: claimName(claim), Request: request, Err: err}
	}
	cp.reqs = take(&free.rps, len(claim.Spec.Devices.Requests))
	for ri := range claim.Spec.Devices.Requests {
		req := &claim.Spec.Devices.Requests[ri]
		rp := reqPlan{first: len(req.FirstAvailable) > 0}
		rp.reqs = take(&free.rptrs, max(1, len(req.FirstAvailable)))
		rp.err = a.gateRequest(claim, req)
		if rp.err == nil && len(req.FirstAvailable) == 0 && req.Exactly == nil {
			rp.err = fatal(req.Name, errors.New("neither exactly nor firstAvailable is set (unsupported request type?)"))
		}
		if rp.err != nil {
			cp.reqs = append(cp.reqs, rp)
			return false
		}
		if rp.first {
			for si := range req.FirstAvailable {
				sub := &req.FirstAvailable[si]
				r := c.newRequest(free, ci, req.Name, sub.Name, subrequestSpec(sub))
				rp.reqs = append(rp.reqs, r)
				if r.err != nil {
					cp.reqs = append(cp.reqs, rp)
					return false
				}
			}
		} else {
			ex := req.Exactly
			r := c.newRequest(free, ci, "", req.Name, exactSpec(ex))
			rp.reqs = append(rp.reqs, r)
			if r.err != nil {
				cp.reqs = append(cp.reqs, rp)
				return false
			}
		}
		cp.reqs = append(cp.reqs, rp)
	}
	for i, con := range claim.Spec.Devices.Constraints {
		switch {
		case con.MatchAttribute != nil:
			cp.cons = append(cp.cons, consPlan{match: true, attr: string(*con.MatchAttribute), names: con.Requests})
		case con.DistinctAttribute != nil:
			cp.cons = append(cp.cons, consPlan{attr: string(*con.DistinctAttribute), names: con.Requests})
		default:
			cp.consErr = fatal("", fmt.Errorf("constraint #%d: empty constraint (unsupported constraint type?)", i))
			return false
		}
	}
	for _, rp := range cp.reqs {
		for _, r := range rp.reqs {
			for i, con := range cp.cons {
				if covers(con.names, r) {
					r.applies = append(r.applies, i)
					if r.derived[con.attr] != nil {
						// Evaluating the attribute can fail fatally.
						r.mayFail = true
					}
				}
			}
			if r.all && len(r.applies) > 0 {
				r.mayFail = true
			}
		}
	}
	return true
}

// gateRequest rejects a request that uses a feature whose gate is off, as
// upstream does before looking at the request: silently ignoring the
// fields would allocate something the claim did not ask for.
func (a *Allocator) gateRequest(claim *resourcev1.ResourceClaim, req *resourcev1.DeviceRequest) error {
	g := &a.g
	fatal := func(err error) error { return &FatalError{Claim: claimName(claim), Request: req.Name, Err: err} }
	if !g.prioritizedList && len(req.FirstAvailable) > 0 {
		return fatal(errors.New("has subrequests, but the DRAPrioritizedList feature is disabled"))
	}
	if g.consumable {
		return nil
	}
	if req.Exactly != nil && req.Exactly.Capacity != nil {
		return fatal(errors.New("has capacity requests, but the DRAConsumableCapacity feature is disabled"))
	}
	for _, sub := range req.FirstAvailable {
		if sub.Capacity != nil {
			return &FatalError{Claim: claimName(claim), Request: req.Name + "/" + sub.Name, Subrequest: sub.Name,
				Err: errors.New("has capacity requests, but the DRAConsumableCapacity feature is disabled")}
		}
	}
	return nil
}

// requestSpec is what an exact request and a firstAvailable subrequest
// state alike; only an exact request can ask for admin access.
type requestSpec struct {
	class   string
	sels    []resourcev1.DeviceSelector
	mode    resourcev1.DeviceAllocationMode
	count   int64
	admin   *bool
	tols    []resourcev1.DeviceToleration
	capReq  *resourcev1.CapacityRequirements
	derived []resourcev1.DeviceDerivedAttribute
}

func exactSpec(ex *resourcev1.ExactDeviceRequest) requestSpec {
	return requestSpec{class: ex.DeviceClassName, sels: ex.Selectors, mode: ex.AllocationMode, count: ex.Count,
		admin: ex.AdminAccess, tols: ex.Tolerations, capReq: ex.Capacity, derived: ex.DerivedAttributes}
}

func subrequestSpec(sub *resourcev1.DeviceSubRequest) requestSpec {
	return requestSpec{class: sub.DeviceClassName, sels: sub.Selectors, mode: sub.AllocationMode, count: sub.Count,
		tols: sub.Tolerations, capReq: sub.Capacity, derived: sub.DerivedAttributes}
}

// newRequest prepares, in the next request of free, request short of
// claim ci, or subrequest short of request parent.
func (c *Claims) newRequest(free *planArena, ci int, parent, short string, spec requestSpec) *request {
	a := c.a
	name := short
	if parent != "" {
		name = parent + "/" + short
	}
	class, sels, mode, count, derived := spec.class, spec.sels, spec.mode, spec.count, spec.derived
	r := &free.reqs[0]
	free.reqs = free.reqs[1:]
	// Field by field: the request is zero, and copying a whole one in
	// would pass every pointer slot through the write barrier.
	r.claim, r.name, r.parent, r.admin = ci, name, parent, ptr.Deref(spec.admin, false)
	r.tols, r.capReq = spec.tols, spec.capReq
	fatal := func(err error) *request {
		r.err = &FatalError{Claim: claimName(c.claims[ci]), Request: name, Err: err}
		return r
	}
	if len(derived) > 0 {
		if !a.g.derived {
			return fatal(errors.New("cannot handle request with derived attributes, the feature is disabled"))
		}
		r.derived = make(map[string]*derivedEntry, len(derived))
		for _, d := range derived {
			r.derived[string(d.Name)] = a.exprs.derived(a.opts.Compiler, d.Expression)
		}
	}
	for i, s := range sels {
		if s.CEL == nil {
			return fatal(fmt.Errorf("selector #%d: CEL expression empty (unsupported selector type?)", i))
		}
	}
	if r.admin && !a.g.adminAccess {
		return fatal(errors.New("admin access is requested, but the feature is disabled"))
	}
	if class == "" {
		return fatal(errors.New("missing device class name (unsupported request type?)"))
	}
	r.class = a.src.Class(class)
	if r.class == nil {
		return fatal(fmt.Errorf("could not retrieve device class %s: not found", class))
	}
	if n := len(r.class.Spec.Selectors) + len(sels); n <= len(r.exprBuf) {
		r.exprs = r.exprBuf[:0]
	} else {
		r.exprs = make([]*exprEntry, 0, n)
	}
	for _, s := range r.class.Spec.Selectors {
		if s.CEL == nil {
			return fatal(fmt.Errorf("class %s: selector has no CEL expression (unsupported selector type?)", class))
		}
		r.exprs = append(r.exprs, a.exprs.selector(a.opts.Compiler, s.CEL.Expression))
	}
	r.nClass = len(r.exprs)
	for _, s := range sels {
		r.exprs = append(r.exprs, a.exprs.selector(a.opts.Compiler, s.CEL.Expression))
	}
	switch mode {
	case resourcev1.DeviceAllocationModeExactCount:
		r.count, r.want = int(count), count
		if count > maxResults {
			// Larger than any claim may hold; the claim-size check reports it.
			r.count = maxResults + 1
		}
	case resourcev1.DeviceAllocationModeAll:
		r.all = true
	default:
		return fatal(fmt.Errorf("unsupported count mode %s", mode))
	}
	return r
}

// covers mirrors upstream: a subrequest is covered when the constraint
// names its parent request or "parent/sub"; no names cover everything.
func covers(names []string, r *request) bool {
	if len(names) == 0 {
		return true
	}
	if r.parent != "" {
		return slices.Contains(names, r.parent) || slices.Contains(names, r.name)
	}
	return slices.Contains(names, r.name)
}

// prepare turns the plan into the claim requests for this node, in upstream's order
// (per claim: per request each alternative, then the claim limit; then
// the constraints), reporting the first problem on the way.
func (at *attempt) prepare() error {
	a := at.a
	if b := at.bufs; b != nil && len(at.claims) <= len(b.cons) {
		at.cons = b.cons[:len(at.claims)]
		at.requests, at.picks = b.reqs[:0], b.picks[:0]
	} else {
		at.cons = make([][]*constraintState, len(at.claims))
	}
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
			cr := claimRequest{claim: ci, first: rp.first}
			if b := at.bufs; b != nil && len(at.requests) == 0 && len(rp.reqs) <= len(b.alts) {
				cr.alternatives = b.alts[:0]
			}
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
				if least < 0 || al.count < least {
					least, want = al.count, al.want
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
			at.cons[ci] = append(at.cons[ci], &constraintState{match: con.match, name: con.attr, names: con.names, lists: a.g.listAttrs})
		}
	}
	return nil
}

// newAlt starts the request's alternative on this node: for "All", every device it
// must take.
func (at *attempt) newAlt(r *request) (*alternative, error) {
	var al *alternative
	if b := at.bufs; b != nil && !b.altUsed {
		al, b.altUsed = &b.alt, true
	} else {
		al = new(alternative)
	}
	*al = alternative{request: r, count: r.count, want: r.want, mayFail: r.mayFail}
	al.candidates = al.cands[:0]
	if !r.all {
		if at.firstPass {
			// The first pass looks at devices as the search reaches them.
			return al, nil
		}
		at.finishAlt(al)
		return al, nil
	}
	if err := at.buildAll(al); err != nil {
		return nil, err
	}
	al.count = len(al.candidates)
	al.want = int64(al.count)
	return al, nil
}

// finishAlt completes the candidate list and decides mayFail. Capacity
// arithmetic of "All" candidates already ran without error in buildAll
// and is static, so only a claim constraint can make them fail fatally,
// which the request says.
func (at *attempt) finishAlt(al *alternative) {
	if al.all {
		return
	}
	at.buildCands(al, false)
	for _, c := range al.candidates {
		if c.err != nil || (c.d.multi && al.capReq != nil) {
			al.mayFail = true
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
	if len(al.exprs) > 0 {
		cols = al.selCols(d.t)
	}
	for i, e := range al.exprs {
		ok, err := eval(at.ctx, e, cols[i], d)
		if err != nil {
			if i < al.nClass {
				return false, 0, at.fatal(al.claim, al.name, fmt.Errorf("class %s: selector #%d (%q) on device %s: CEL error: %w", al.class.Name, i, e.expr, d.id(), err))
			}
			return false, 0, at.fatal(al.claim, al.name, fmt.Errorf("selector #%d (%q) on device %s: CEL error: %w", i-al.nClass, e.expr, d.id(), err))
		}
		if !ok {
			if i < al.nClass {
				return false, ReasonDriverOrClass, nil
			}
			return false, ReasonSelector, nil
		}
	}
	if d.sliceInfo().perDevice {
		ok, err := d.node.matches(at.node)
		if err != nil {
			return false, 0, at.fatal(al.claim, al.name, err)
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
		if !slices.Contains(at.node.Status.DeclaredFeatures, nodeOperationsFeature) {
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
		return al.capReq == nil || len(al.capReq.Requests) == 0, nil
	}
	if al.capReq == nil && len(used) == 0 {
		return d.alone, d.aloneErr
	}
	return capacityFits(al.capReq, d.cap, used, nil, at.a.g.fractional)
}

// blockedByTaint: with DRADeviceTaints on, an untolerated NoSchedule or
// NoExecute taint prevents allocation.
func (at *attempt) blockedByTaint(al *alternative, d *devInfo) bool {
	return at.a.g.taints && d.tainted && taintBlocks(d.d.Taints, al.tols)
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
	if !al.admin && np.h.allocated(i) {
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
			c.err = at.fatal(al.claim, al.name, fmt.Errorf("checking capacity for device %s: %w", d.id(), err))
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
		if u.amt > np.t.capacity[u.rel]-at.base[np.ctrBase+u.rel] {
			return u.rel
		}
	}
	if h.overcommitted {
		return h.over[0]
	}
	return -1
}

// buildAll is upstream's list for allocationMode All: every device of every
// considered pool that the selectors and node select and whose capacity
// could hold the request on an unused device. The pools must all be usable.
func (at *attempt) buildAll(al *alternative) error {
	for _, np := range at.pools {
		id := np.t.p.ID
		if np.incomplete {
			return at.fatal(al.claim, al.name, fmt.Errorf("asks for all devices, but resource pool %s is currently being updated", id))
		}
		if np.invalid != nil {
			return at.fatal(al.claim, al.name, fmt.Errorf("asks for all devices, but resource pool %s is currently invalid: %w", id, np.invalid))
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
					return at.fatal(al.claim, al.name, fmt.Errorf("checking capacity for device %s: %w", d.id(), err))
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

// taintBlocks: only NoSchedule and NoExecute taints prevent allocation;
// None and unknown effects are informational.
func taintBlocks(taints []api.DeviceTaint, tols []resourcev1.DeviceToleration) bool {
	for _, t := range taints {
		if t.Effect != resourcev1.DeviceTaintEffectNoSchedule && t.Effect != resourcev1.DeviceTaintEffectNoExecute {
			continue
		}
		if !tolerated(t, tols) {
			return true
		}
	}
	return false
}

func tolerated(t api.DeviceTaint, tols []resourcev1.DeviceToleration) bool {
	for _, tol := range tols {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case "", resourcev1.DeviceTolerationOpEqual:
			if tol.Value == t.Value {
				return true
			}
		case resourcev1.DeviceTolerationOpExists:
			return true
		}
	}
	return false
}
