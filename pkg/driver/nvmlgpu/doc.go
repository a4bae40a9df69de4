// Package nvmlgpu is the NVML backend of dractl-gpu-driver: a
// driverkit.Profile for NVIDIA GPUs through NVML (github.com/NVIDIA/go-nvml).
//
// Discovery reads everything from NVML — UUIDs, product, memory, MIG mode
// and, for GPUs with MIG on, every GPU instance profile with its placements
// — and publishes it the one way pkg/driver/mig publishes MIG GPUs (KEP-4815): per
// GPU a counter set of memory slices and shared engines, every placement a
// device consuming from it, and the whole GPU. A GPU with MIG off is one
// whole device. No table is consulted on this path.
//
// Preparing a MIG device creates its GPU instance at the allocated
// placement and one compute instance over it; unpreparing destroys them in
// the reverse order. The driver records what it creates in a versioned
// file in its state directory and lists only those as its partitions, so
// reconciliation at start never touches instances someone else made.
//
// XID critical errors from NVML's event set make a GPU and its devices
// unhealthy through the kit's health service, and tainted on the
// published slices; the XIDs of an application's fault (IgnoredXIDs)
// leave it healthy and are notices for NoticeLifetime (informational
// taints).
//
// The package needs cgo: go-nvml loads libnvidia-ml.so at run time.
// Package nvmlmock runs it on NVIDIA's mock DGX servers.
package nvmlgpu
