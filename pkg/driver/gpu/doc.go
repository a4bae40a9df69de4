// Package gpu is dractl-gpu-driver apart from its command line: what both
// of its backends share (the driver name, DeviceClasses, the opaque
// configuration, the containers' environment) and the mock backend. The
// NVML backend, pkg/driver/nvmlgpu, builds on it.
//
// GpuConfig is the opaque device configuration of
// dractl-gpu-driver, given in a DeviceClass's spec.config or a claim's
// spec.devices.config:
//
//	config:
//	- requests: [gpu]
//	  opaque:
//	    driver: gpu.dractl.dev
//	    parameters:
//	      apiVersion: gpu.dractl.dev/v1alpha1
//	      kind: GpuConfig
//	      computeInstanceProfile: 1c.3g.20gb
//	      timeSlicing:
//	        interval: Short
//
// Several configurations may apply to one device (its class's, then the
// claim's): each field set by a later one overrides the earlier ones.
//
// GPUs is the mock backend of dractl-gpu-driver (--backend=mock): MIG-capable GPUs
// simulated in a state directory. A partition is created at prepare time —
// the effect of `nvidia-smi mig -cgi` — as a file that records the MIG
// device, its placement and the claim it was made for, and destroyed at
// unprepare. Like the hardware, the mock refuses a partition that overlaps
// one that exists: the memory slices it covers and every engine count of
// pkg/driver/mig's table are checked.
package gpu
