// Package state keeps everything DRA allocation depends on for a whole
// cluster — ResourceSlices, DeviceClasses and ResourceClaims, including
// allocations a scheduler has made but not yet written (assumed) — and
// hands out immutable snapshots of it.
//
// A State is fed deltas by its caller: an informer's event handlers (see
// pkg/core/state/informer), a simulator, or the CLI reading files. It does no
// I/O. A scheduling cycle is:
//
//	snap := st.Snapshot()               // immutable, safe for parallel use
//	cyc := snap.Cycle(podClaims, opts)  // per pod: classes, selectors
//	results, err := cyc.Allocate(ctx, node) // per node, from many goroutines
//	st.Assume(claimWithAllocation)      // the chosen node's result
//
// (Example runs it.) Deltas that cannot be applied (unknown objects,
// conflicting allocations) return an error and leave the State as it was.
//
// An assumed allocation lasts until the claim is observed allocated, is
// deleted, or is forgotten (Forget). With it the State keeps what its
// caller records of it (an Assumption: who made it, AssumeBy; in which
// resource version the caller's write was stored, SetWritten; or, for a
// write of unknown outcome, the version it was based on and until when
// its devices stay held, SetMaybeWritten), so that a scheduler needs no
// books of its own that could drift from the State's. These records
// change no answer: they are not deltas and make no new snapshot. The
// State acts on none of them; deciding when an assumption is wrong (the
// claim moved past the written version without the allocation, a hold
// ran out) is the caller's.
//
// # Memory
//
// What a scheduler does per cycle (a snapshot, a Cycle, an Allocate per
// node) allocates a fixed, small number of blocks, which tests count. The
// package reuses memory in exactly two ways: maps are copied on write
// (cow.go), and a snapshot carries inside it what its first Cycle needs
// (reuse.go). Anything else that is reused belongs to the allocator
// (pkg/core/allocator, reuse.go).
package state
