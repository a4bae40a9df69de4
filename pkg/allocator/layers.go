package allocator

import (
	"slices"
)

// The search is a plain core (search.go: try a device, recurse, undo, in
// upstream's order) with layers on top that each only cut branches which
// cannot succeed, so that the first success, the devices it picks and any
// fatal error upstream would meet on the way are the same with every layer
// on or off. Options.withoutLayers switches layers off; tests compare the
// answers (layers_test.go). doc.go says why each layer is safe.
type layers uint8

const (
	// layerFirstPass runs the core alone first, building candidate lists
	// only as far as it reaches and giving up after firstPassBudget steps;
	// only then are the full lists built and the pruning layers run
	// (firstpass.go). First-fit only.
	layerFirstPass layers = 1 << iota
	// layerClaimLimit stops at a request when a later request of the same
	// claim cannot stay within the claim's result limit (limitDoomed).
	layerClaimLimit
	// layerRequestBound stops when some later request, alone, no longer
	// fits what is left (requestsMayFit).
	layerRequestBound
	// layerJointBound stops when the later requests together need more
	// distinct devices than are left for them (jointBound).
	layerJointBound
	// layerInfeasibleSuffix stops before a run of final requests that a
	// probe found unsatisfiable even on a fresh state (suffix.go).
	layerInfeasibleSuffix
	// layerCombinationBound stops picking devices for one request when
	// fewer than it still needs can be picked together from the rest of
	// its candidates (boundOK).
	layerCombinationBound

	allLayers = layerFirstPass | layerClaimLimit | layerRequestBound | layerJointBound |
		layerInfeasibleSuffix | layerCombinationBound
)

// on reports whether all of ls are switched on for this attempt.
func (at *attempt) on(ls layers) bool { return at.a.opts.withoutLayers&ls == 0 }

// hopeless reports whether the requests from ri on cannot all be satisfied
// from the current picks, by the layers that look ahead: requests that
// no longer fit alone, together, or as a suffix a probe found infeasible.
// Picks only take devices, counters, constraint values and result room
// away, so what fails here fails in the whole subtree. None of them looks
// past the first request that may fail fatally (risky): upstream would
// reach it and could report that error, which pruning would turn into a
// plain misfit.
func (at *attempt) hopeless(ri int) bool {
	risky := ri
	for risky < len(at.requests) && !slices.ContainsFunc(at.requests[risky].alternatives, func(al *alternative) bool { return al.mayFail }) {
		risky++
	}
	if at.on(layerInfeasibleSuffix) && at.infeasibleFrom > 0 && at.infeasibleFrom >= ri && at.infeasibleFrom < risky {
		return true
	}
	if at.on(layerRequestBound) && !at.requestsMayFit(ri, risky) {
		return true
	}
	return risky == len(at.requests) && at.on(layerJointBound) && !at.jointBound(ri)
}

// requestsMayFit: every request in [ri, risky) may still fit alone (for
// a firstAvailable request, one of its subrequests), and the risky request,
// if any, has an alternative that does not surely fail without error.
func (at *attempt) requestsMayFit(ri, risky int) bool {
	for rj := ri; rj < risky; rj++ {
		if !slices.ContainsFunc(at.requests[rj].alternatives, at.mayFit) {
			return false
		}
	}
	if risky == len(at.requests) {
		return true
	}
	return slices.ContainsFunc(at.requests[risky].alternatives, func(al *alternative) bool { return !at.failsCleanly(al) })
}

// limitDoomed: some later request of the same claim breaks the claim limit
// even if every request up to it takes its smallest alternative. Only
// decided when none of the claim's requests can fail fatally, so that no
// error upstream would meet while trying other devices is skipped.
func (at *attempt) limitDoomed(ri int) bool {
	c := at.requests[ri].claim
	for rj := ri - 1; rj >= 0 && at.requests[rj].claim == c; rj-- {
		if slices.ContainsFunc(at.requests[rj].alternatives, func(al *alternative) bool { return al.mayFail }) {
			return false
		}
	}
	n := at.claimCount[c]
	for rj := ri; rj < len(at.requests) && at.requests[rj].claim == c; rj++ {
		least := -1
		for _, al := range at.requests[rj].alternatives {
			if al.mayFail || (al.all && len(al.candidates) == 0) {
				return false
			}
			if least < 0 || al.count < least {
				least = al.count
			}
		}
		if n+least > maxResults {
			return true
		}
		n += least
	}
	return false
}
