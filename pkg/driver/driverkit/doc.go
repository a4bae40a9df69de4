// Package driverkit is what a DRA driver's kubelet plugin starts: Start
// (or StartNode, from a command line) runs a Profile of package prepare as
// a kubelet plugin on the helpers of k8s.io/dynamic-resource-allocation —
// kubeletplugin serves the registration and DRA gRPC services and looks
// claims up, resourceslice publishes slices and bumps generations — and
// adds
//
//   - the pool published as package publish builds it for the node's
//     kube-apiserver (read once at start, ReadServer), refused as a whole
//     when invalid: an error to the driver and an Event on the Node;
//   - the prepare kit behind the DRA gRPC services, reconciled before the
//     plugin registers, claims of different pods prepared in parallel;
//   - device health through the helper's health service, when the
//     driver's Profile reports it (HealthProfile), and as taints of the
//     published devices (taints.go): an unhealthy device, and the
//     partitions of an unhealthy GPU, NoSchedule (NoExecute on request)
//     until it recovers;
//   - its metrics (Metrics): prepares and unprepares, prepared claims and
//     partitions, slice writes, health events.
//
// Pools that no node owns are published from the control plane instead,
// by publish.StartController.
package driverkit
