// Package allocator finds devices for the ResourceClaims of one pod on one
// node, the way kube-scheduler's structured allocator does
// (k8s.io/dynamic-resource-allocation v0.37.2) with the DRA feature gates of
// Options.Features (all on by default; features.go says what each gate
// changes), and explains why when they do not fit.
//
// What the allocator knows is split by how long it stays true, so that an
// incremental cluster state (pkg/state) rebuilds only what a change
// touched:
//   - PoolTable: one pool's slices — node selection per slice and, built on
//     first use, the device table with dense indices, counter sets,
//     validity per node view, and selector, attribute and derived-attribute
//     results per device. Valid until one of the pool's slices changes.
//   - PoolState: a table plus the results of the allocated claims that name
//     the pool; what they hold (devices, shares, consumed capacity, counters
//     left) is derived once, on first use. Valid until such a claim changes.
//   - Allocator: a Source (the pools a node may see, the classes) and the
//     options. Building one costs nothing; New builds tables for a whole
//     state given at once.
//   - Claims (Prepare): one pod's claims with classes looked up, selectors
//     compiled (Options.Cache keeps them across Allocators) and requests
//     checked; then Allocate per node, from many goroutines at once, does
//     only the work that depends on the node and looks only at the node's
//     pools, so it does not grow with the size of the cluster.
//
// Pools are judged as each node sees them (node.go): the generation the
// node's slices have, complete and valid by upstream's rules for that view.
//
// # The search
//
// The search is built like a scheduler stack: a plain core, pruning
// layers that only remove branches which cannot succeed, and a strategy
// that orders candidates.
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
// The strategy (strategy.go) orders each request's candidates: FirstFit
// in upstream's order (pools by driver then pool, pools with binding
// conditions last; slices by name; devices in slice order), which
// KEP-4815 describes as the scheduler going through devices in order and
// taking the first fit; BestFit by what a device takes away from others
// (bestfit.go), for the simulator.
//
// The layers (layers.go; Options.withoutLayers switches each off in
// tests, and a property test checks that no layer changes an answer):
//   - first pass (firstpass.go): the core alone over candidate lists
//     built only as far as it reaches, within a step budget; cheap when
//     the first few devices fit. Not a pruning: over budget, the full pass
//     starts over with complete lists and the pruning layers.
//   - claim limit (limitDoomed): a later request of the claim cannot stay
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
//   - combination bound (boundOK): within one request, fewer devices than
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
package allocator
