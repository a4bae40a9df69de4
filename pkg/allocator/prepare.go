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

// alt is one way to satisfy a request: the request itself, or one
// subrequest of a firstAvailable request.
type alt struct {
	claim  int
	name   string // as written into results: "req" or "req/sub"
	parent string // request name when this is a subrequest
	short  string // request or subrequest name
	class  *resourcev1.DeviceClass
	exprs  []*exprEntry // class selectors, then request selectors
	nClass int
	admin  bool
	all    bool
	count  int
	tols   []resourcev1.DeviceToleration
	capReq *resourcev1.CapacityRequirements
	// want is the count as the request states it, for messages; count is
	// capped just above the claim limit.
	want int64
	// derived are the request's derived attributes by name: constraints
	// read these instead of the device's own attributes.
	derived map[string]*derivedEntry
	applies []int // indices of the claim's constraints that cover this alt
	// mayFail: trying this alt can end in a fatal error (a candidate that
	// failed evaluation, an "All" request, a shared device whose capacity
	// arithmetic can fail), so the search must not prune past it.
	mayFail bool
	cands   []cand
	scan    scanCursor // how far cands are built
	rej     [numReasons]int
	ctrRej  map[string]int
}

// cand is a device that passed the static checks for an alt. err is set
// when evaluating the device failed; the search reports it when it reaches
// the device, which is when upstream would have evaluated it.
type cand struct {
	d   *devInfo
	l   int32 // attempt-local device index
	np  int32 // index into attempt.pools
	err error
	// full: upstream's "all devices" list, where every dynamic and static
	// check runs at pick time.
	full bool
}

type slot struct {
	claim int
	alts  []*alt
	// first: a firstAvailable request, whose subrequests are the alts.
	first  bool
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

// prepare validates the claims like upstream's Allocate preamble, in its
// order (per claim: per request the feature checks, then each alternative,
// then the claim limit; then the constraints), and builds one slot per
// request with its alts and their candidates.
func (at *attempt) prepare() error {
	a := at.a
	at.cons = make([][]*constraintState, len(at.claims))
	for ci, claim := range at.claims {
		if claim == nil {
			return &FatalError{Err: errors.New("nil claim")}
		}
		minDevices := 0
		for ri := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[ri]
			if err := at.gateRequest(ci, req); err != nil {
				return err
			}
			sl := slot{claim: ci, first: len(req.FirstAvailable) > 0}
			least := -1
			var want int64
			if len(req.FirstAvailable) > 0 {
				for si := range req.FirstAvailable {
					sub := &req.FirstAvailable[si]
					al, err := at.newAlt(ci, req.Name+"/"+sub.Name, req.Name, sub.Name, sub.DeviceClassName, sub.Selectors,
						sub.AllocationMode, sub.Count, nil, sub.Tolerations, sub.Capacity, sub.DerivedAttributes)
					if err != nil {
						return err
					}
					sl.alts = append(sl.alts, al)
					if least < 0 || al.count < least {
						least, want = al.count, al.want
					}
				}
			} else {
				ex := req.Exactly
				if ex == nil {
					return at.fatal(ci, req.Name, errors.New("neither exactly nor firstAvailable is set (unsupported request type?)"))
				}
				al, err := at.newAlt(ci, req.Name, "", req.Name, ex.DeviceClassName, ex.Selectors,
					ex.AllocationMode, ex.Count, ex.AdminAccess, ex.Tolerations, ex.Capacity, ex.DerivedAttributes)
				if err != nil {
					return err
				}
				sl.alts = append(sl.alts, al)
				least, want = al.count, al.want
			}
			// Upstream's words, with the request's own count.
			if least > maxResults-minDevices {
				return at.fatal(ci, req.Name, fmt.Errorf("adding %d devices exceeds the claim limit of %d, with %d already accounted for", want, maxResults, minDevices))
			}
			minDevices += least
			at.slots = append(at.slots, sl)
		}
		for i, c := range claim.Spec.Devices.Constraints {
			cs := &constraintState{names: c.Requests, lists: a.g.listAttrs}
			switch {
			case c.MatchAttribute != nil:
				cs.match = true
				cs.col = a.attrs.col(string(*c.MatchAttribute))
			case c.DistinctAttribute != nil:
				cs.col = a.attrs.col(string(*c.DistinctAttribute))
			default:
				return at.fatal(ci, "", fmt.Errorf("constraint #%d: empty constraint (unsupported constraint type?)", i))
			}
			at.cons[ci] = append(at.cons[ci], cs)
		}
	}
	for si := range at.slots {
		for _, al := range at.slots[si].alts {
			for i, cs := range at.cons[al.claim] {
				if cs.covers(al) {
					al.applies = append(al.applies, i)
					if al.derived[cs.col.name] != nil {
						// Evaluating the attribute can fail fatally.
						al.mayFail = true
					}
				}
			}
			if al.all && len(al.applies) > 0 {
				al.mayFail = true
			}
		}
	}
	return nil
}

// gateRequest rejects a request that uses a feature whose gate is off, as
// upstream does before looking at the request: silently ignoring the
// fields would allocate something the claim did not ask for.
func (at *attempt) gateRequest(ci int, req *resourcev1.DeviceRequest) error {
	g := &at.a.g
	if !g.prioritizedList && len(req.FirstAvailable) > 0 {
		return at.fatal(ci, req.Name, errors.New("has subrequests, but the DRAPrioritizedList feature is disabled"))
	}
	if g.consumable {
		return nil
	}
	if req.Exactly != nil && req.Exactly.Capacity != nil {
		return at.fatal(ci, req.Name, errors.New("has capacity requests, but the DRAConsumableCapacity feature is disabled"))
	}
	for _, sub := range req.FirstAvailable {
		if sub.Capacity != nil {
			return &FatalError{Claim: claimName(at.claims[ci]), Request: req.Name + "/" + sub.Name, Subrequest: sub.Name,
				Err: errors.New("has capacity requests, but the DRAConsumableCapacity feature is disabled")}
		}
	}
	return nil
}

func (at *attempt) newAlt(ci int, name, parent, short, class string, sels []resourcev1.DeviceSelector,
	mode resourcev1.DeviceAllocationMode, count int64, admin *bool, tols []resourcev1.DeviceToleration,
	capReq *resourcev1.CapacityRequirements, derived []resourcev1.DeviceDerivedAttribute) (*alt, error) {
	a := at.a
	al := &alt{claim: ci, name: name, parent: parent, short: short, admin: ptr.Deref(admin, false),
		tols: tols, capReq: capReq}
	if len(derived) > 0 {
		if !a.g.derived {
			return nil, at.fatal(ci, name, errors.New("cannot handle request with derived attributes, the feature is disabled"))
		}
		al.derived = make(map[string]*derivedEntry, len(derived))
		for _, d := range derived {
			al.derived[string(d.Name)] = a.derivedExpr(d.Expression)
		}
	}
	for i, s := range sels {
		if s.CEL == nil {
			return nil, at.fatal(ci, name, fmt.Errorf("selector #%d: CEL expression empty (unsupported selector type?)", i))
		}
	}
	if al.admin && !a.g.adminAccess {
		return nil, at.fatal(ci, name, errors.New("admin access is requested, but the feature is disabled"))
	}
	if class == "" {
		return nil, at.fatal(ci, name, errors.New("missing device class name (unsupported request type?)"))
	}
	al.class = a.classes[class]
	if al.class == nil {
		return nil, at.fatal(ci, name, fmt.Errorf("could not retrieve device class %s: not found", class))
	}
	for _, s := range al.class.Spec.Selectors {
		if s.CEL == nil {
			return nil, at.fatal(ci, name, fmt.Errorf("class %s: selector has no CEL expression (unsupported selector type?)", class))
		}
		al.exprs = append(al.exprs, a.sel.get(s.CEL.Expression))
	}
	al.nClass = len(al.exprs)
	for _, s := range sels {
		al.exprs = append(al.exprs, a.sel.get(s.CEL.Expression))
	}
	switch mode {
	case resourcev1.DeviceAllocationModeExactCount:
		al.count, al.want = int(count), count
		if count > maxResults {
			// Larger than any claim may hold; the claim-size check reports it.
			al.count = maxResults + 1
		}
		if at.lazy {
			// The first pass looks at devices as the search reaches them.
			return al, nil
		}
	case resourcev1.DeviceAllocationModeAll:
		al.all = true
		if err := at.buildAll(al); err != nil {
			return nil, err
		}
		al.count = len(al.cands)
		al.want = int64(al.count)
	default:
		return nil, at.fatal(ci, name, fmt.Errorf("unsupported count mode %s", mode))
	}
	at.finishAlt(al)
	return al, nil
}

// finishAlt completes the candidate list and decides mayFail.
func (at *attempt) finishAlt(al *alt) {
	if !al.all {
		at.buildCands(al, false)
	}
	if al.all {
		// Capacity arithmetic of "All" candidates already ran without error
		// in buildAll and is static, so only a claim constraint can make
		// them fail fatally; prepare decides once the constraints are known.
		return
	}
	for _, c := range al.cands {
		if c.err != nil || (c.d.multi && al.capReq != nil) {
			al.mayFail = true
			break
		}
	}
}

// selectable runs the class selectors, the request selectors and the
// per-device node selection, in upstream's order. With binding conditions
// off, a device that has them is never selectable.
func (at *attempt) selectable(al *alt, d *devInfo) (bool, Reason, error) {
	a := at.a
	if !a.g.bindingConditions && len(d.d.BindingConditions) > 0 {
		return false, ReasonFeatureGate, nil
	}
	for i, e := range al.exprs {
		ok, err := a.eval(at.ctx, e, d)
		if err != nil {
			if i < al.nClass {
				return false, 0, at.fatal(al.claim, al.name, fmt.Errorf("class %s: selector #%d (%q) on device %s: CEL error: %w", al.class.Name, i, e.expr, a.devID(d), err))
			}
			return false, 0, at.fatal(al.claim, al.name, fmt.Errorf("selector #%d (%q) on device %s: CEL error: %w", i-al.nClass, e.expr, a.devID(d), err))
		}
		if !ok {
			if i < al.nClass {
				return false, ReasonDriverOrClass, nil
			}
			return false, ReasonSelector, nil
		}
	}
	if a.slices[d.slice].perDevice {
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
	if len(at.a.slices[d.slice].s.Spec.SkipNodeOperations) > 0 {
		if !g.nodeOps {
			return false, ReasonFeatureGate
		}
		if !slices.Contains(at.node.Status.DeclaredFeatures, nodeOperationsFeature) {
			return false, ReasonNodeOperations
		}
	}
	if !g.partitionable && len(d.d.ConsumesCounters) > 0 {
		return false, ReasonFeatureGate
	}
	return true, 0
}

// staticCapacity checks the request's capacity against the device on top
// of used; without DRAConsumableCapacity capacity is not looked at.
func (at *attempt) staticCapacity(al *alt, d *devInfo, used capMap) (bool, error) {
	if !at.a.g.consumable {
		return true, nil
	}
	if d.cap == nil {
		return al.capReq == nil || len(al.capReq.Requests) == 0, nil
	}
	return capacityFits(al.capReq, d.cap, used, nil, at.a.g.fractional)
}

// blockedByTaint: with DRADeviceTaints on, an untolerated NoSchedule or
// NoExecute taint prevents allocation.
func (at *attempt) blockedByTaint(al *alt, d *devInfo) bool {
	return at.a.g.taints && taintBlocks(d.d.Taints, al.tols)
}

// buildCands lists, in upstream's visiting order, the devices that can serve
// the alt on their own, counting every other device under its reason.
func (at *attempt) buildCands(al *alt, explainOnly bool) {
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

// more extends al.cands by at least one candidate, looking at no more
// devices than that takes; false when no device is left.
func (at *attempt) more(al *alt) bool {
	n := len(al.cands)
	for len(al.cands) == n {
		if !at.scanOne(al, false) {
			return false
		}
	}
	return true
}

// scanOne looks at the device under the cursor (a whole slice of an
// unusable pool) and advances; false once everything was seen.
func (at *attempt) scanOne(al *alt, explainOnly bool) bool {
	a := at.a
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
		s := &a.slices[np.slices[cur.sl]]
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

func (at *attempt) scanDev(al *alt, np *nodePool, npi, i int32, explainOnly bool) {
	a := at.a
	d := np.t.dev(i)
	c := cand{d: d, l: np.devBase + i, np: npi}
	if !al.admin && d.allocated {
		al.rej[ReasonAllocated]++
		return
	}
	ok, reason, err := at.selectable(al, d)
	if err != nil {
		if !explainOnly {
			c.err = err
			al.cands = append(al.cands, c)
		}
		return
	}
	if !ok {
		al.rej[reason]++
		return
	}
	fits, err := at.staticCapacity(al, d, d.aggCap)
	if err != nil {
		if !explainOnly {
			c.err = at.fatal(al.claim, al.name, fmt.Errorf("checking capacity for device %s: %w", a.devID(d), err))
			al.cands = append(al.cands, c)
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
	if bad := at.counterMisfitAlone(d, np.t); bad >= 0 {
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
		al.cands = append(al.cands, c)
	}
}

// counterMisfitAlone returns the pool-relative index of the first counter
// the device cannot get even if nothing else were picked, -1 when it fits.
func (at *attempt) counterMisfitAlone(d *devInfo, t *poolTable) int32 {
	if len(d.uses) == 0 || (d.multi && d.shareInUse) {
		return -1
	}
	for _, u := range d.uses {
		if u.amt > t.avail[u.rel] {
			return u.rel
		}
	}
	if t.overcommitted {
		return t.over[0]
	}
	return -1
}

// buildAll is upstream's list for allocationMode All: every device of every
// considered pool that the selectors and node select and whose capacity
// could hold the request on an unused device. The pools must all be usable.
func (at *attempt) buildAll(al *alt) error {
	a := at.a
	for _, np := range at.pools {
		id := a.pools[np.pool].p.ID
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
			s := &a.slices[si]
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
					return at.fatal(al.claim, al.name, fmt.Errorf("checking capacity for device %s: %w", a.devID(d), err))
				}
				if !fits {
					continue
				}
				al.cands = append(al.cands, cand{d: d, l: np.devBase + i, np: int32(npi), full: true})
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
