// Package publish turns a pool described with dractl's API (mixins
// allowed) into what the resourceslice controller publishes: flattened,
// admission- and pool-validated, counter sets in slices of their own,
// split at v1's per-slice limits, refused as a whole when invalid.
// Admission is a kube-apiserver's, read once (ReadServer: the rules of
// its minor, the nearest supported minor's for one dractl has none of,
// and no field its schema of resource.k8s.io/v1 lacks); a server without
// resource.k8s.io/v1 is refused by name.
//
// A node's pool is built by BuildFor (package driverkit publishes it from
// the node's kubelet plugin). Pools that no node owns — network-attached
// devices, a multi-host block with perDeviceNodeSelection, allNodes
// pools — are built by BuildCentralFor and published from the control
// plane (KEP-4815): StartController, run by the replicas of a Deployment,
// publishes them while it holds a Lease. Each side refuses the other's
// pools.
package publish
