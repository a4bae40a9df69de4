// Package state keeps everything DRA allocation depends on for a whole
// cluster — ResourceSlices, DeviceClasses and ResourceClaims, including
// allocations a scheduler has made but not yet written (assumed) — and
// hands out immutable snapshots of it.
//
// A State is fed deltas by its caller: an informer's event handlers, a
// simulator, or the CLI reading files. It does no I/O. A scheduling cycle
// is:
//
//	snap := st.Snapshot()               // immutable, safe for parallel use
//	cyc := snap.Cycle(podClaims, opts)  // per pod: classes, selectors
//	results, err := cyc.Allocate(ctx, node) // per node, from many goroutines
//	st.Assume(claimWithAllocation)      // the chosen node's result
//
// Deltas that cannot be applied (unknown objects, conflicting allocations)
// return an error and leave the State as it was.
package state
