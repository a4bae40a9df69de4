//go:build race

package state_test

// raceEnabled: under the race detector sync.Pool drops items at random, so
// the search's pooled scratch space is sometimes allocated afresh.
const raceEnabled = true
