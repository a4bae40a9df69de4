package allocator

// strategy decides the order in which the search tries the candidates
// of a request; the core and the pruning layers do not depend on it, and
// each order is searched completely, so only the preference among
// feasible answers changes. Options.Strategy picks one (strategyOf).
type strategy interface {
	// order returns al's candidates in the order to try them; "All"
	// requests take every candidate, so their order is kept.
	order(at *attempt, al *alternative) []candidate
	// upstreamOrder: the order is upstream's, so that the first success
	// is upstream's first success. Only then may the search start with
	// the first pass (firstpass.go) and probe for infeasible suffixes
	// (suffix.go), which assume that order.
	upstreamOrder() bool
}

// firstFit keeps upstream's order (doc.go).
type firstFit struct{}

func (firstFit) order(_ *attempt, al *alternative) []candidate { return al.candidates }
func (firstFit) upstreamOrder() bool                           { return true }

// bestFit orders each request's candidates by what picking them takes
// away from other requests (bestfit.go), to pack partitionable devices;
// the simulator uses it.
type bestFit struct{}

func (bestFit) upstreamOrder() bool { return false }

// strategyOf returns the strategy of s. A value that names no strategy
// searches in upstream's order but without the shortcuts, which are
// promised only to FirstFit.
func strategyOf(s Strategy) strategy {
	switch s {
	case FirstFit:
		return firstFit{}
	case BestFit:
		return bestFit{}
	}
	return unknownStrategy{}
}

// unknownStrategy is firstFit's order without claiming it.
type unknownStrategy struct{ firstFit }

func (unknownStrategy) upstreamOrder() bool { return false }
