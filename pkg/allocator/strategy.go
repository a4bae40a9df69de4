package allocator

// The strategy decides the order in which the search tries the candidates
// of a request; the core and the pruning layers do not depend on it, and
// each order is searched completely, so only the preference among
// feasible answers changes.
//   - FirstFit keeps upstream's order (doc.go), so the first success is
//     upstream's first success; with it the search starts with the first
//     pass (firstpass.go).
//   - BestFit orders each request's candidates by what picking them takes
//     away from other requests (bestFitOrder), to pack partitionable
//     devices; the simulator uses it.

// order returns the candidates of al in the order the strategy tries
// them. "All" requests take every candidate, so their order is kept.
func (at *attempt) order(al *alternative) []candidate {
	if at.a.opts.Strategy == BestFit && !al.all {
		return at.bestFitOrder(al)
	}
	return al.candidates
}
