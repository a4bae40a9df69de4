package allocator

import (
	"slices"
)

// The search is a plain core (search.go: try a device, recurse, undo, in
// upstream's order) with layers on top that each only cut branches which
// cannot succeed, so that the first success, the devices it picks and any
// fatal error upstream would meet on the way are the same with every layer
// on or off. The core asks them through pruner; pruning is their one
// implementation and holds everything they keep. Options.withoutLayers
// switches layers off; tests compare the answers (layers_test.go). doc.go
// says why each layer is safe.
type layerSet uint8

const (
	// layerFirstPass runs the core alone first, building candidate lists
	// only as far as it reaches and giving up after firstPassBudget steps;
	// only then are the full lists built and the pruning layers run
	// (firstpass.go). First-fit only. Allocate decides it, not pruning.
	layerFirstPass layerSet = 1 << iota
	// layerClaimLimit stops at a request when a later request of the same
	// claim cannot stay within the claim's result limit (claimDoomed).
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
	// its candidates (lastStart, boundOK).
	layerCombinationBound

	allLayers = layerFirstPass | layerClaimLimit | layerRequestBound | layerJointBound |
		layerInfeasibleSuffix | layerCombinationBound

	// lookAhead are the layers that look at later requests' candidate
	// lists, which the first pass has not built.
	lookAhead = layerRequestBound | layerJointBound | layerInfeasibleSuffix
	// lazyOff are the layers the first pass runs without: it is the core
	// alone, but for the claim limit, which needs no candidate list.
	lazyOff = lookAhead | layerCombinationBound
)

// pruner is what the core asks before it goes deeper. Every answer may
// only cut branches in which no success and no fatal error upstream would
// report lies. It reads the core's state and changes none of it.
type pruner interface {
	// start runs once the requests are built, before the search.
	start() error
	// claimDoomed: a request of the claim, from ri on, cannot stay within
	// the claim's result limit whatever is picked; the core unwinds as
	// for errClaimLimit.
	claimDoomed(ri int) bool
	// hopeless: the requests from ri on cannot all be satisfied from the
	// current picks.
	hopeless(ri int) bool
	// lastStart is the last index of order from which the core may pick
	// the next device of al when need devices are still to pick from
	// order[pos:]; below pos when none can succeed.
	lastStart(al *alternative, order []candidate, pos, need int) int
}

// pruning is the state of the pruning layers: what they switch off, what they found
// before the search and the scratch they count in. It reads the core's
// state through at.
type pruning struct {
	at  *attempt
	off layerSet
	// infeasibleFrom is the first request of the final ones that cannot be
	// satisfied together even with nothing else picked (suffix.go); 0 when
	// not known.
	infeasibleFrom int

	// Scratch for countBound, indexed like the core's counters and
	// counter sets (lent by the scratch, reuse.go).
	cntSet  []int32
	cntCtr  []int32
	minAmt  []uint64
	touched []touchedSet
	// Scratch for valueBound.
	groups map[scalarKey]int32
	// Scratch for jointBound: devices seen in this epoch.
	seen  []uint32
	epoch uint32
	union []candidate
}

type touchedSet struct {
	local int32
	set   int32
	np    int32
}

// on reports whether all of ls are switched on.
func (b *pruning) on(ls layerSet) bool { return b.off&ls == 0 }

// start probes for infeasible suffixes. Only first-fit's full pass does:
// a hard search is known by then, and the probes cost more than an easy
// search.
func (b *pruning) start() error {
	if !b.on(layerInfeasibleSuffix) || !b.at.a.strategy.upstreamOrder() {
		return nil
	}
	return b.suffixes()
}

// hopeless decides by the layers that look ahead: requests that no
// longer fit alone, together, or as a suffix a probe found infeasible.
// Picks only take devices, counters, constraint values and result room
// away, so what fails here fails in the whole subtree. None of them looks
// past the first request that may fail fatally (risky): upstream would
// reach it and could report that error, which pruning would turn into a
// plain misfit.
func (b *pruning) hopeless(ri int) bool {
	if b.off&lookAhead == lookAhead {
		return false
	}
	at := b.at
	risky := ri
	for risky < len(at.requests) && !slices.ContainsFunc(at.requests[risky].alternatives, (*alternative).mayFail) {
		risky++
	}
	if b.on(layerInfeasibleSuffix) && b.infeasibleFrom > 0 && b.infeasibleFrom >= ri && b.infeasibleFrom < risky {
		return true
	}
	if b.on(layerRequestBound) && !b.requestsMayFit(ri, risky) {
		return true
	}
	return risky == len(at.requests) && b.on(layerJointBound) && !b.jointBound(ri)
}

// requestsMayFit: every request in [ri, risky) may still fit alone (for
// a firstAvailable request, one of its subrequests), and the risky request,
// if any, has an alternative that does not surely fail without error.
func (b *pruning) requestsMayFit(ri, risky int) bool {
	at := b.at
	for rj := ri; rj < risky; rj++ {
		if !slices.ContainsFunc(at.requests[rj].alternatives, b.mayFit) {
			return false
		}
	}
	if risky == len(at.requests) {
		return true
	}
	return slices.ContainsFunc(at.requests[risky].alternatives, func(al *alternative) bool { return !b.failsCleanly(al) })
}

// claimDoomed: some later request of the same claim breaks the claim limit
// even if every request up to it takes its smallest alternative. Only
// decided when none of the claim's requests can fail fatally, so that no
// error upstream would meet while trying other devices is skipped.
func (b *pruning) claimDoomed(ri int) bool {
	if !b.on(layerClaimLimit) {
		return false
	}
	at := b.at
	c := at.requests[ri].claim
	for rj := ri - 1; rj >= 0 && at.requests[rj].claim == c; rj-- {
		if slices.ContainsFunc(at.requests[rj].alternatives, (*alternative).mayFail) {
			return false
		}
	}
	n := at.st.claimCount[c]
	for rj := ri; rj < len(at.requests) && at.requests[rj].claim == c; rj++ {
		least := -1
		for _, al := range at.requests[rj].alternatives {
			if al.mayFail() || (al.req.all && len(al.candidates) == 0) {
				return false
			}
			if cnt := al.count(); least < 0 || cnt < least {
				least = cnt
			}
		}
		if n+least > maxResults {
			return true
		}
		n += least
	}
	return false
}

// lastStart is the combination bound. Upstream visits every remaining
// device even when too few are left, and one of them may be an error it
// must report: only a request that cannot fail fatally is bounded.
func (b *pruning) lastStart(al *alternative, order []candidate, pos, need int) int {
	if al.mayFail() || !b.on(layerCombinationBound) {
		return len(order) - 1
	}
	if len(order)-pos < need || (need > 1 && !b.boundOK(al, order[pos:], need)) {
		return pos - 1
	}
	return len(order) - need
}
