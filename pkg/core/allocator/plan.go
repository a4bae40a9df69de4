package allocator

import (
	"errors"
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/features"
)

// maxResults is the API's limit on devices per claim allocation.
const maxResults = resourcev1.AllocationResultsMaxSize

// Plan is the part of allocating one pod's claims that does not depend
// on the node: classes looked up, selectors and derived attributes
// compiled, requests checked against the feature gates, and what no node
// can fix recorded for Allocate to report in upstream's order. A
// scheduler plans once per scheduling cycle and then asks for many
// nodes, from many goroutines at once; each Allocate builds only the
// node's candidates (candidates.go).
type Plan struct {
	a       *Allocator
	claims  []*resourcev1.ResourceClaim
	byClaim []claimPlan
	inline  planInline // reuse.go
}

// claimPlan is one claim's requests in order, up to the first that cannot
// be planned.
type claimPlan struct {
	err  error // a nil claim
	reqs []reqPlan
	cons []consPlan
	// consErr: a constraint that cannot be used; reported after the
	// requests, as upstream checks constraints after them.
	consErr error
}

// reqPlan is one request of a claim: the request itself or, for a
// firstAvailable request, its subrequests in preference order.
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

// request is one way to satisfy a request of a claim, as far as it does
// not depend on the node: the request itself or one subrequest of a
// firstAvailable request, with its class, compiled selectors and shape.
// The plan decides it once; every Allocate call reads it.
type request struct {
	claim  int
	name   string // as written into results: "req" or "req/sub"
	parent string // request name when this is a subrequest
	class  *resourcev1.DeviceClass
	exprs  []*exprEntry // class selectors, then request selectors
	nClass int
	// exprBuf holds exprs when they are few (reuse.go).
	exprBuf exprInline
	admin   bool
	all     bool
	// mayFail: trying it can end in a fatal error whatever the node: a
	// constraint reads a derived attribute, or an "All" request is
	// constrained. An alternative adds what its candidates risk
	// (alternative.mayFail).
	mayFail bool
	// count is the number of devices an ExactCount request picks, capped
	// just above the claim limit; want is the count as the request states
	// it, for messages. Neither is set for "All", whose count depends on
	// the node (alternative.count).
	count  int
	want   int64
	tols   []resourcev1.DeviceToleration
	capReq *resourcev1.CapacityRequirements
	// derived are the request's derived attributes by name: constraints
	// read these instead of the device's own attributes.
	derived map[string]*derivedEntry
	applies []int // indices of the claim's constraints that cover this request
	// err: planning the request failed; Allocate reports it when it
	// reaches the request, as upstream does.
	err error
}

func claimName(c *resourcev1.ResourceClaim) string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

// Plan plans the claims of one pod, which are allocated together.
// Problems that no node can fix are reported by Allocate, in the order
// upstream meets them.
func (a *Allocator) Plan(claims []*resourcev1.ResourceClaim) *Plan {
	p := new(Plan)
	a.PlanInto(p, claims)
	return p
}

// PlanInto is Plan into p, which must be the zero Plan and not be copied
// afterwards: for a caller that keeps the Plan in an object of its own
// per scheduling cycle and so saves its allocation.
func (a *Allocator) PlanInto(p *Plan, claims []*resourcev1.ResourceClaim) {
	p.a, p.claims = a, claims
	var free planArena
	p.arena(claims, &free)
	for ci, claim := range claims {
		cp := &p.byClaim[ci]
		if claim == nil {
			cp.err = &FatalError{Err: errors.New("nil claim")}
			break
		}
		if !p.planClaim(ci, claim, cp, &free) {
			break
		}
	}
}

// planClaim fills cp; false when planning stopped at an error.
func (p *Plan) planClaim(ci int, claim *resourcev1.ResourceClaim, cp *claimPlan, free *planArena) bool {
	a := p.a
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
				r := p.newRequest(free, ci, req.Name, sub.Name, subrequestSpec(sub))
				rp.reqs = append(rp.reqs, r)
				if r.err != nil {
					cp.reqs = append(cp.reqs, rp)
					return false
				}
			}
		} else {
			ex := req.Exactly
			r := p.newRequest(free, ci, "", req.Name, exactSpec(ex))
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
		return fatal(errors.New(features.RefusalSubrequests))
	}
	if g.consumable {
		return nil
	}
	if req.Exactly != nil && req.Exactly.Capacity != nil {
		return fatal(errors.New(features.RefusalCapacity))
	}
	for _, sub := range req.FirstAvailable {
		if sub.Capacity != nil {
			return &FatalError{Claim: claimName(claim), Request: req.Name + "/" + sub.Name, Subrequest: sub.Name,
				Err: errors.New(features.RefusalCapacity)}
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

// newRequest plans, in the next request of free, request short of claim
// ci, or subrequest short of request parent.
func (p *Plan) newRequest(free *planArena, ci int, parent, short string, spec requestSpec) *request {
	a := p.a
	name := short
	if parent != "" {
		name = parent + "/" + short
	}
	class, sels, mode, count, derived := spec.class, spec.sels, spec.mode, spec.count, spec.derived
	r := free.nextRequest()
	// Field by field: the request is zero, and copying a whole one in
	// would pass every pointer slot through the write barrier.
	r.claim, r.name, r.parent, r.admin = ci, name, parent, ptr.Deref(spec.admin, false)
	r.tols, r.capReq = spec.tols, spec.capReq
	fatal := func(err error) *request {
		r.err = &FatalError{Claim: claimName(p.claims[ci]), Request: name, Err: err}
		return r
	}
	if len(derived) > 0 {
		if !a.g.derived {
			return fatal(errors.New(features.RefusalDerived))
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
		return fatal(errors.New(features.RefusalAdminAccess))
	}
	if class == "" {
		return fatal(errors.New("missing device class name (unsupported request type?)"))
	}
	r.class = a.src.Class(class)
	if r.class == nil {
		return fatal(fmt.Errorf("could not retrieve device class %s: not found", class))
	}
	r.exprs = r.exprBuf.slice(len(r.class.Spec.Selectors) + len(sels))
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
