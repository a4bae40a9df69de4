package allocator

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// Allocate finds devices for all claims together on the node, as the
// scheduler does for one pod. On success it returns one result per claim,
// in claim order. Errors:
//   - *UnfitError: the claims do not fit on this node; its Explanation says
//     why. Other nodes may fit. When invalid pools were among the pools the
//     node sees, Explanation.InvalidPools lists them with every problem
//     (*pool.InvalidError): upstream treats this as a per-node failure
//     (ErrFailedAllocationOnNode), so a caller trying several nodes should
//     report these pools only when no node fits.
//   - *FatalError: no node can fix it: an incomplete or invalid pool seen
//     by an "All" request, a constraint that excludes a device an "All"
//     request must take, a CEL error, an unknown class, a request upstream
//     rejects.
//   - ctx.Err() as is when ctx ends during the search.
//
// Claims that are already allocated are allocated again; callers pass only
// pending claims. Allocate is Prepare followed by Claims.Allocate; a
// caller that asks for many nodes prepares once.
func (a *Allocator) Allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) ([]*resourcev1.AllocationResult, error) {
	return a.Prepare(claims).Allocate(ctx, node)
}

// Allocate allocates the claims on node; see Allocator.Allocate for the
// results and errors. It may be called for many nodes concurrently.
func (c *Claims) Allocate(ctx context.Context, node *corev1.Node) ([]*resourcev1.AllocationResult, error) {
	a, claims := c.a, c.claims
	if node == nil {
		return nil, &FatalError{Err: errors.New("node is nil")}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The attempt and the pools of a node that sees one, in one
	// allocation.
	blk := &struct {
		at    attempt
		pools [1]nodePool
	}{}
	pools, err := a.gatherPools(node, blk.pools[:])
	if err != nil {
		return nil, &FatalError{Err: err}
	}
	at := &blk.at
	*at = attempt{a: a, ctx: ctx, node: node, claims: claims, plan: c.plan, pools: pools, lazy: a.opts.Strategy == FirstFit}
	defer func() { at.release() }()
	if err := at.prepare(); err != nil {
		return nil, err
	}
	at.size()
	ok, err := at.solve(0)
	a.nodes.Add(at.nodes)
	if errors.Is(err, errClaimLimit) {
		ok, err = false, nil
	}
	if errors.Is(err, errLazyBudget) {
		at.release()
		at = &attempt{a: a, ctx: ctx, node: node, claims: claims, plan: c.plan, pools: pools}
		if err := at.prepare(); err != nil {
			return nil, err
		}
		at.size()
		if err := at.suffixes(); err != nil {
			return nil, err
		}
		ok, err = at.solve(0)
		a.nodes.Add(at.nodes)
		if errors.Is(err, errClaimLimit) {
			ok, err = false, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if ok {
		return at.results()
	}
	if at.lazy {
		at.lazy = false
		for si := range at.slots {
			for _, al := range at.slots[si].alts {
				at.finishAlt(al)
			}
		}
	}
	expl, err := at.explain()
	if err != nil {
		return nil, err
	}
	// Upstream skips invalid pools while searching and, when nothing else
	// worked, fails the node (not the pod): another node may not see them.
	for _, np := range pools {
		if np.invalid != nil {
			expl.InvalidPools = append(expl.InvalidPools, np.invalid)
		}
	}
	return nil, &UnfitError{Node: node.Name, Explanation: expl}
}

// Stats describe the work Allocate calls have done.
type Stats struct {
	// SearchNodes counts the nodes of the search trees of every Allocate
	// call so far, in the units of upstream's allocateOne calls: one per
	// request entered, per subrequest tried, per device picked and per
	// claim finished. The first-fit pass visits exactly upstream's nodes;
	// pruning only ever lowers the count. Explanations are not counted.
	SearchNodes int64
	// ProbeNodes counts the nodes of the smaller searches that pruning
	// (whether later requests can be satisfied at all) and explanations
	// (whether each request fits alone) run.
	ProbeNodes int64
}

// Stats returns the work done so far.
func (a *Allocator) Stats() Stats {
	return Stats{SearchNodes: a.nodes.Load(), ProbeNodes: a.probeNodes.Load()}
}

// explain recounts every alt's devices by reason and tries each alt alone.
func (at *attempt) explain() (*Explanation, error) {
	e := &Explanation{Node: at.node.Name}
	claimIdx := map[int]int{}
	for si := range at.slots {
		sl := &at.slots[si]
		for _, al := range sl.alts {
			ci, ok := claimIdx[al.claim]
			if !ok {
				ci = len(e.Claims)
				claimIdx[al.claim] = ci
				e.Claims = append(e.Claims, ClaimExplanation{Claim: claimName(at.claims[al.claim])})
			}
			probe := &alt{request: al.request, count: al.count, want: al.want}
			at.buildCands(probe, true)
			re := RequestExplanation{Request: al.name, Needed: al.count, Rejected: map[Reason]int{}, Counters: probe.ctrRej}
			for r, n := range probe.rej {
				if n > 0 {
					re.Rejected[Reason(r)] = n
				}
			}
			re.Candidates = len(al.cands)
			alone, err := at.alone(al)
			if err != nil {
				return nil, err
			}
			re.SatisfiableAlone = alone
			if !alone && re.Candidates >= re.Needed {
				// Enough devices one by one, but never together: counters
				// shared between them or the claim's constraints.
				re.Rejected[ReasonConstraint] = re.Candidates
			}
			e.Claims[ci].Requests = append(e.Claims[ci].Requests, re)
		}
	}
	return e, nil
}

// alone runs the search for one alt on a fresh state.
func (at *attempt) alone(al *alt) (bool, error) {
	probe := &attempt{a: at.a, ctx: at.ctx, node: at.node, claims: at.claims, plan: at.plan, pools: at.pools, cons: at.cons,
		slots: []slot{{claim: al.claim, alts: []*alt{al}}}}
	probe.size()
	for _, cs := range at.cons[al.claim] {
		cs.stack = cs.stack[:0]
	}
	ok, err := probe.solve(0)
	at.a.probeNodes.Add(probe.nodes)
	if errors.Is(err, errClaimLimit) {
		ok, err = false, nil
	}
	var fe *FatalError
	if errors.As(err, &fe) {
		return false, nil
	}
	for _, cs := range at.cons[al.claim] {
		cs.stack = cs.stack[:0]
	}
	return ok, err
}
