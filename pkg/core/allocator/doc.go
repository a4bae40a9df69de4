// Package allocator finds devices for the ResourceClaims of one pod on one
// node, the way kube-scheduler's structured allocator does
// (k8s.io/dynamic-resource-allocation v0.37.2, or v0.38 as
// Options.KubeVersion asks; versions.go says what differs) with the DRA
// feature gates of Options.Features (all on by default; features.go says
// what each gate changes), and explains why when they do not fit.
//
// What the allocator knows is split by how long it stays true, so that an
// incremental cluster state (pkg/core/state) rebuilds only what a change
// touched, and Allocate, called per node from many goroutines at once,
// does only the work that depends on the node and looks only at the
// node's pools, so it does not grow with the size of the cluster:
//
//	type             what it holds                                   lifetime
//	PoolTable        one pool's slices: node selection per slice;    until one of the pool's slices changes
//	 (genTable)      built on first use, per generation, devices
//	                 with dense indices, counter sets, validity per
//	                 node view, selector / attribute / derived
//	                 results per device (cache.go)
//	PoolState        a table and the results of allocated claims     until such a claim changes
//	 (heldGen)       naming the pool; what they hold (devices,
//	                 shares, capacity, counters), on first use
//	Allocator        a Source (the pools a node may see, classes)    one cluster state (a snapshot)
//	                 and the options; New builds tables for a
//	                 state given whole
//	Plan             one pod's claims: classes looked up, CEL        one scheduling cycle (one pod)
//	 (plan.go)       compiled (Options.Cache keeps it across
//	                 Allocators), request shapes, what no node can
//	                 fix, reported in upstream's order
//	nodePool         a pool as one node sees it (node.go)            one Allocate call
//	claimRequest,    the plan's requests on the node with their      one Allocate call
//	 alternative     candidate devices and what rejected the others
//	 (candidates.go)
//	attempt          one search: the core's searchState (what        one pass of one Allocate call
//	 (search.go)     picks hold), its budget, the pruning layers
//	                 (pruning) and the strategy it asks
//
// Pools are judged as each node sees them (node.go): the generation the
// node's slices have, complete and valid by upstream's rules for that view.
//
// # The search
//
// The search is built like a scheduler stack: a plain core, pruning
// layers that only remove branches which cannot succeed, and a strategy
// that orders candidates. The core owns its state; it asks the layers
// through the pruner interface and the strategy through the strategy
// interface, and neither leaves a trace in what the core owns.
//
// The core (search.go) is upstream's depth-first search: for each claim,
// request and firstAvailable subrequest in listed order, try a candidate
// device (tryAdd: in use, counters, taints, constraints, capacity, in
// upstream's order), recurse to the next device or request, undo on
// failure. Devices of one request are tried as increasing combinations.
// The claim limit of 32 results (resource.k8s.io/v1
// AllocationResultsMaxSize) unwinds to the nearest firstAvailable choice,
// as upstream's errAllocationResultMaxSizeExceeded does.
//
// The strategy (strategy.go) orders each request's candidates: firstFit
// in upstream's order (pools by driver then pool, pools with binding
// conditions last; slices by name; devices in slice order), which
// KEP-4815 describes as the scheduler going through devices in order and
// taking the first fit; bestFit by what a device takes away from others
// (bestfit.go), for the simulator.
//
// The layers (layers.go: one type, pruning, holds what they found and
// the scratch they count in; Options.withoutLayers switches each off in
// tests, and a property test checks that no layer changes an answer):
//   - first pass (firstpass.go): the core alone over candidate lists
//     built only as far as it reaches, within a step budget; cheap when
//     the first few devices fit. Not a pruning: over budget, the full pass
//     starts over with complete lists and the pruning layers.
//   - claim limit (claimDoomed): a later request of the claim cannot stay
//     within 32 results even if every request takes its smallest
//     alternative. Picks only add results, so only another subrequest of
//     an earlier firstAvailable request can help, which is where the core
//     unwinds to.
//   - request bound (requestsMayFit, mayFit): some later request alone no
//     longer fits the free devices, counters and constraint values left.
//   - joint bound (jointBound): the later requests need distinct devices,
//     more than the union of their candidates can give under the counters.
//     Admin access and devices that allow multiple allocations
//     (allowMultipleAllocations, resource.k8s.io/v1) may be picked twice,
//     so either turns it off.
//   - infeasible suffix (suffix.go): the final requests were found, by a
//     bounded probe on a fresh state, not to fit together at all.
//   - combination bound (lastStart, boundOK): within one request, fewer devices than
//     it still needs can be picked together from the rest of its
//     candidates: per counter set, no more than a counter's room over the
//     smallest amount any of them takes (KEP-4815: committed counters
//     never exceed what a counter set has); under matchAttribute, no more
//     than the largest group of equal values, under distinctAttribute no
//     more than the number of distinct values.
//
// Why cutting is safe: picks only ever take devices, counters, capacity,
// constraint values and result room away, so what cannot fit now cannot
// fit deeper in the same branch, and the first success of the pruned
// search is the core's first success. Upstream also stops at the first
// fatal error it meets (a CEL error, a constraint an "All" request breaks);
// a branch is never cut past a request that may fail fatally (mayFail),
// so the same error is reported.
//
// # Memory reuse
//
// A scheduler plans once per pod and allocates on every node, so the
// common pod (one claim of one request, one pool on the node, one device
// picked) must cost next to no allocation. Every trick for it lives in
// reuse.go, and follows one rule: what a call would allocate is cut from
// arrays inline in an object already paid for (the Plan, the scratch,
// the result block) or lent by the scratch pool, and nothing lent
// outlives the call that borrowed it; results and explanations copy what
// they keep. The exported Into variants (Init, PlanInto,
// PoolTable.WithInto) let a caller place those objects inside its own.
// Short lists in stack arrays (var buf [4]T) are plain Go and stay where
// they are used. What tables build on first use (genTable.static and
// dev, heldOnce, localView) is laziness, not reuse: each is built once
// under its own sync.Once or lock and read without one afterwards.
package allocator
