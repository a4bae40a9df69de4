package allocator

import (
	"context"
	"errors"
	"time"

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
//   - *NodeError: from Kubernetes 1.38 on, an incomplete or invalid pool
//     seen by an "All" request; other nodes may fit.
//   - *FatalError: no node can fix it: an incomplete or invalid pool seen
//     by an "All" request (before 1.38), a constraint that excludes a device an "All"
//     request must take, a CEL error, an unknown class, a request upstream
//     rejects.
//   - ctx.Err() as is when ctx ends during the search.
//
// Claims that are already allocated are allocated again; callers pass only
// pending claims. Allocate is Plan followed by Plan.Allocate; a caller
// that asks for many nodes plans once.
func (a *Allocator) Allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) ([]*resourcev1.AllocationResult, error) {
	return a.Plan(claims).Allocate(ctx, node)
}

// Allocate allocates the planned claims on node; see Allocator.Allocate
// for the results and errors. It may be called for many nodes
// concurrently.
func (p *Plan) Allocate(ctx context.Context, node *corev1.Node) ([]*resourcev1.AllocationResult, error) {
	return p.AllocateWithin(ctx, node, 0)
}

// AllocateWithin is Allocate with the search bounded by timeout (0: no
// bound): past it, the search ends with context.DeadlineExceeded, as
// Allocate's does when ctx's deadline passes. The search reads the clock
// where it checks ctx, every 64 steps, instead of arming a timer: a
// scheduler bounds every node's Filter, and on a node that answers in a
// few microseconds a timer would be a large part of the cost. A CEL
// selector's own evaluation is bounded by its cost limit, not by timeout.
func (p *Plan) AllocateWithin(ctx context.Context, node *corev1.Node, timeout time.Duration) ([]*resourcev1.AllocationResult, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	a := p.a
	if node == nil {
		return nil, &FatalError{Err: errors.New("node is nil")}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return nil, expired(ctx)
	}
	// The attempts' arrays and lists come from a pool: a scheduler asks
	// every node in every cycle, and nothing of them outlives the call
	// (results and explanations copy what they keep).
	sc := scratchPool.Get().(*scratch)
	bufs := &sc.bufs
	var at *attempt
	defer func() {
		at.release()
		sc.bufs.reset()
		scratchPool.Put(sc)
	}()
	pools, err := a.gatherPools(node, bufs.nodePools())
	if err != nil {
		return nil, &FatalError{Err: err}
	}
	// First-fit tries the cheap first pass before the full one; best-fit
	// orders whole candidate lists, so it starts with the full pass.
	ok, err := false, errFirstPassBudget
	if a.strategy.upstreamOrder() && a.opts.withoutLayers&layerFirstPass == 0 {
		at = p.newAttempt(&sc.passes[0], ctx, deadline, node, pools, true, sc, bufs)
		if ok, err = at.run(); err != nil && !errors.Is(err, errFirstPassBudget) {
			return nil, err
		}
	}
	if errors.Is(err, errFirstPassBudget) {
		at.release()
		if at != nil {
			// The first pass used the buffers.
			bufs = nil
		}
		at = p.newAttempt(&sc.passes[1], ctx, deadline, node, pools, false, sc, bufs)
		if ok, err = at.run(); err != nil {
			return nil, err
		}
	}
	if ok {
		return at.results()
	}
	if at.lazy {
		at.lazy = false
		for ri := range at.requests {
			for _, al := range at.requests[ri].alternatives {
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

// expiryGrace bounds how long expired waits for a context to end.
const expiryGrace = 100 * time.Millisecond

// expired is the error of ctx, whose deadline has passed by the clock. A
// context ends from a timer, which may not have fired yet (at once for a
// deadline in the past, but on another goroutine); expired waits for it,
// so that what Allocate returns is the ctx.Err() its caller sees
// afterwards, rather than starting a search that ends at the first check
// or finishes before it.
func expired(ctx context.Context) error {
	t := time.NewTimer(expiryGrace)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return context.DeadlineExceeded
	}
}

// Stats describe the work Allocate calls have done.
type Stats struct {
	// SearchNodes counts the nodes of the search trees of every Allocate
	// call so far, in the units of upstream's allocateOne calls: one per
	// request entered, per subrequest tried, per device picked and per
	// claim finished. The first-fit pass visits exactly upstream's nodes;
	// each pruning layer only ever lowers the count. Explanations are not counted.
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

// explain recounts every alternative's devices by reason and tries each alternative alone.
func (at *attempt) explain() (*Explanation, error) {
	e := &Explanation{Node: at.node.Name}
	claimIdx := map[int]int{}
	for ri := range at.requests {
		cr := &at.requests[ri]
		for _, al := range cr.alternatives {
			ci, ok := claimIdx[al.req.claim]
			if !ok {
				ci = len(e.Claims)
				claimIdx[al.req.claim] = ci
				e.Claims = append(e.Claims, ClaimExplanation{Claim: claimName(at.claims[al.req.claim])})
			}
			probe := &alternative{req: al.req}
			at.buildCands(probe, true)
			re := RequestExplanation{Request: al.req.name, Needed: al.count(), Rejected: map[Reason]int{}, Counters: probe.ctrRej, Taints: probe.taintRej}
			for r, n := range probe.rej {
				if n > 0 {
					re.Rejected[Reason(r)] = n
				}
			}
			re.Candidates = len(al.candidates)
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

// alone runs the search for one alternative on a fresh state.
func (at *attempt) alone(al *alternative) (bool, error) {
	probe := at.probe([]claimRequest{{claim: al.req.claim, alternatives: []*alternative{al}}})
	probe.size()
	for _, cs := range at.cons[al.req.claim] {
		cs.stack = cs.stack[:0]
	}
	ok, err := probe.solve(0)
	at.a.probeNodes.Add(probe.nodes)
	if errors.Is(err, errClaimLimit) {
		ok, err = false, nil
	}
	var fe *FatalError
	var ne *NodeError
	if errors.As(err, &fe) || errors.As(err, &ne) {
		return false, nil
	}
	for _, cs := range at.cons[al.req.claim] {
		cs.stack = cs.stack[:0]
	}
	return ok, err
}
