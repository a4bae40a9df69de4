//go:build race

package allocator

// raceEnabled: the race detector slows searches about tenfold, so
// property tests run fewer cases.
const raceEnabled = true
