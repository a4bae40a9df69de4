// Package driverkit is what a DRA driver's kubelet plugin needs beyond the
// helpers of k8s.io/dynamic-resource-allocation: kubeletplugin serves the
// registration and DRA gRPC services and looks claims up, resourceslice
// publishes slices and bumps generations; this package adds
//
//   - publishing a pool described with dractl's API (mixins allowed):
//     flattened, admission- and pool-validated, counter sets in slices of
//     their own, refused as a whole (error to the driver, Event on the Node)
//     when invalid; admission is the node's kube-apiserver's, read once at
//     start (ReadServer: the rules of its minor, the nearest supported
//     minor's for one dractl has none of, and no field its schema of
//     resource.k8s.io/v1 lacks), and a server without resource.k8s.io/v1
//     is refused by name;
//   - prepare and unprepare of partitionable devices with a two-phase,
//     crash-safe checkpoint per claim (PrepareStarted → partitions created →
//     CDI spec written → PrepareCompleted), idempotent in both directions,
//     refusing a device or an overlapping partition that another claim holds;
//   - reconciliation at start: PrepareStarted claims are rolled back,
//     interrupted unprepares finished, partitions no completed claim owns
//     destroyed;
//   - opaque configuration: the class and claim configs of the
//     allocation that apply to each device, resolved as upstream drivers
//     resolve them, decoded by the Profile (ConfigProfile) and handed to
//     it with the device, or refused before anything is created;
//   - a transient CDI spec per claim, written with
//     tags.cncf.io/container-device-interface, with edits per device and,
//     for a RequestEditsProfile, per request (what a container gets
//     together);
//   - device health through the helper's health service, when the
//     driver's Profile reports it, and as taints of the published devices
//     (taints.go): an unhealthy device, and the partitions of an unhealthy
//     GPU, NoSchedule (NoExecute on request) until it recovers.
//
// Pools that no node owns — network-attached devices, a multi-host block
// with perDeviceNodeSelection, allNodes pools — are published from the
// control plane instead (KEP-4815): StartController, run by the replicas
// of a Deployment, validates and flattens them as the node side does
// (BuildCentral) and publishes them while it holds a Lease. Each side
// refuses the other's pools.
//
// A driver supplies a Profile: the hardware-specific part (create and
// destroy a partition, list what exists, the container edits of a device).
// Everything above is the same for every partitionable driver.
package driverkit
