package state

import "fmt"

// Condition is whether the scheduler can allocate from a pool.
type Condition string

const (
	// PoolOK: complete and valid.
	PoolOK Condition = "ok"
	// PoolIncomplete: fewer (or more) slices of the current generation
	// than resourceSliceCount. The allocator skips the pool; normal while
	// a driver publishes, a problem when it lasts.
	PoolIncomplete Condition = "incomplete"
	// PoolInvalid: complete but breaking a rule that spans its slices
	// (KEP-4815 "Validation"): the allocator must not use any of it.
	PoolInvalid Condition = "invalid"
)

// Condition returns the pool's condition and, unless it is ok, why, in one
// line: "2 of 5 slices of generation 1", or the first problem of an
// invalid pool followed by how many more there are.
func (u *PoolUsage) Condition() (Condition, string) {
	if !u.Complete() {
		return PoolIncomplete, fmt.Sprintf("%d of %d slices of generation %d", len(u.Slices), u.SliceCount, u.Generation)
	}
	if u.Invalid != nil && len(u.Invalid.Problems) > 0 {
		why := u.Invalid.Problems[0].String()
		if n := len(u.Invalid.Problems) - 1; n > 0 {
			why += fmt.Sprintf(" (and %d more)", n)
		}
		return PoolInvalid, why
	}
	return PoolOK, ""
}

// Allocated counts the devices in use (held by a claim other than for
// admin access).
func (u *PoolUsage) Allocated() int {
	n := 0
	for i := range u.Devices {
		if u.Devices[i].InUse() {
			n++
		}
	}
	return n
}
