// Package live reads the DRA objects of a running cluster with client-go:
// ResourceSlices, DeviceClasses, ResourceClaims, ResourceClaimTemplates,
// Nodes and Pods, listed in pages so that clusters of thousands of nodes
// are read in bounded memory per request, and feeds them to a
// state.State. It also writes what it read to files that the offline verbs
// read back (Snapshot). ResourceSlices are decoded on every core while the
// next page is fetched, and a caller that only checks pools decodes only
// what pool checks read (PoolFields), once for each value the slices of a
// cluster's nodes hold alike (Sharer does the same for an informer's).
//
// Errors name the verb and resource that failed ("cannot list
// resourceslices.resource.k8s.io: ...") and tell an unreachable API server
// apart from a refusal (Unreachable, Forbidden).
package live
