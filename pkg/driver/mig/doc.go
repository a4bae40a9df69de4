// Package mig holds the MIG profile tables of NVIDIA GPUs (A100 40GB,
// H100 80GB) and the one way dractl publishes a node's MIG GPUs: per GPU a
// counter set (memory slices, multiprocessors, engines) in a slice of its
// own and every placement of every profile as a device that consumes from
// it (KEP-4815 "Putting it all together for the MIG use-case").
//
// The examples, the test generators, the conformance scenarios and the mock
// GPU driver all read these tables; a second copy would let one of them
// hand out two partitions that share a memory slice.
package mig
