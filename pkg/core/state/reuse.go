package state

// Memory the State reuses instead of allocating, gathered here; the rule
// is in doc.go ("Memory"). A scheduler takes one snapshot per scheduling
// cycle and plans one Cycle per snapshot, so what a snapshot needs for
// that cycle is allocated with it, in one block.

// newCycle returns the snapshot's first Cycle, which lives inside the
// snapshot, or a new one for every Cycle after it. The first caller wins
// the snapshot's own Cycle with one atomic swap, so concurrent callers
// never share one.
func (s *Snapshot) newCycle() *Cycle {
	if s.firstTaken.CompareAndSwap(false, true) {
		return &s.first
	}
	return new(Cycle)
}
