// Package allocator finds devices for the ResourceClaims of one pod on one
// node, the way kube-scheduler's structured allocator does
// (k8s.io/dynamic-resource-allocation v0.37.2) with the DRA feature gates of
// Options.Features (all on by default; features.go says what each gate
// changes), and explains why when they do not fit.
//
// An Allocator is built once per cluster state (pools, classes, allocated
// claims) and then answers Allocate for many nodes, from several goroutines
// at once. Everything that does not depend on the node is computed in New or
// cached lazily for the Allocator's lifetime: device tables with dense
// integer indices, counter availability, compiled CEL and per-device
// selector results. Options.Cache carries compiled selectors and the
// per-device selector and attribute results, which depend only on slice
// content, over to later Allocators, because a scheduler rebuilds the
// Allocator whenever a claim is allocated although no slice changed.
// Per-node work touches only the slices that name the node
// plus the slices that do not name any node, so it does not grow with the
// size of the cluster.
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
