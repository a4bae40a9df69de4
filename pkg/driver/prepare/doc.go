// Package prepare is the part of a DRA driver that prepares claims on its
// node. A driver supplies a Profile: the hardware-specific part (create
// and destroy a partition, list what exists, the container edits of a
// device); the Kit does the rest, the same for every partitionable
// driver:
//
//   - prepare and unprepare with a two-phase, crash-safe checkpoint per
//     claim (PrepareStarted → partitions created → CDI spec written →
//     PrepareCompleted), idempotent in both directions, refusing a device
//     or an overlapping partition that another claim holds, checked
//     against the Inventory of what the driver publishes;
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
//   - failpoints after every step (KillAt) for crash tests, and why an
//     operation failed (ReasonOf).
//
// Package driverkit runs a Kit as a kubelet plugin.
package prepare
