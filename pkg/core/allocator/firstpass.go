package allocator

import (
	"errors"
)

// The first pass is the plain core over candidate lists built only as far
// as the search reaches them, exactly like upstream's enumeration: when
// first-fit succeeds (or fails) within a few devices per request, building
// every list and bounding would cost more than the search. It gives up
// after firstPassBudget steps; the full pass then builds every list and
// runs the pruning layers. Selector results are cached per device, so
// little is lost.

// errFirstPassBudget ends the first pass.
var errFirstPassBudget = errors.New("first pass over budget")

// firstPassBudget is the number of search steps and devices tried the
// first pass may take.
const firstPassBudget = 256

// fillLazy is fill for the first pass: upstream's plain enumeration, with
// candidates built as it reaches them.
func (at *attempt) fillLazy(ri int, al *alternative, k, pos int) (bool, error) {
	b := &at.budget
	if b.steps > firstPassBudget {
		return false, errFirstPassBudget
	}
	for i := pos; i < len(al.candidates) || at.more(al); i++ {
		// Every device tried counts: a failing constraint can reject
		// thousands without recursing.
		if b.steps++; b.steps > firstPassBudget {
			return false, errFirstPassBudget
		}
		if done, err := at.descend(ri, al, nil, al.candidates[i], k, i+1); done || err != nil {
			return done, err
		}
	}
	return false, nil
}
