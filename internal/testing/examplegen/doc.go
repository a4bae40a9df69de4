// Package examplegen writes the generated manifests under examples/: the
// MIG ResourceSlices of an A100 node (flat and with KEP-5234 mixins) and of
// a DGX H100 node (mixins), the NVIDIA DeviceClasses they share, and the
// multi-host TPU pool of KEP-4815.
//
// The slices are built from tables (profile → memory, multiprocessors,
// engines, memory-slice placements) rather than written by hand because a
// MIG pool repeats the same numbers hundreds of times; one wrong copy would
// let the allocator hand out two partitions that share a memory slice.
//
// TestExamplesUpToDate compares Files with the checked-in files;
//
//	go test ./internal/testing/examplegen -update
//
// rewrites them.
package examplegen
