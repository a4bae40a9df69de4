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
// First-fit search visits candidates in upstream's order (pools by driver
// then pool, pools with binding conditions last; slices by name; devices in
// slice order; claims, requests and firstAvailable subrequests in listed
// order; devices of one request as increasing combinations). The search only
// adds pruning that removes branches which cannot succeed (counter,
// constraint and claim-limit bounds), so its first success is upstream's
// first success.
package allocator
