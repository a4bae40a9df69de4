package allocator

import (
	"errors"
	"slices"
)

// errProbeBudget ends a probe of suffixes.
var errProbeBudget = errors.New("probe over budget")

// probeBudget bounds the steps suffixes spends on each probe.
const probeBudget = 4096

// suffixes finds the latest request from which the remaining requests
// cannot be satisfied together even on a fresh state, and records it in
// infeasibleFrom. A search from any request before it fails there too:
// picks only take devices, counters, constraint values and result room
// away, so the later requests fit no better. That needs every later request
// to be unable to fail fatally (upstream would report that instead) and no
// device that allows multiple allocations (a share picked earlier lets
// later picks of the device skip counters). Each probe is a complete search
// of the suffix, bounded by probeBudget; when over budget nothing is
// concluded.
func (b *pruning) suffixes() error {
	at := b.at
	for rj := len(at.requests) - 1; rj >= 1; rj-- {
		for _, al := range at.requests[rj].alternatives {
			if al.mayFail() || slices.ContainsFunc(al.candidates, func(c candidate) bool { return c.d.multi }) {
				return nil
			}
		}
		probe := at.probe(slices.Clone(at.requests[rj:]))
		probe.budget = budget{limit: probeBudget, over: errProbeBudget}
		probe.size()
		ok, err := probe.solve(0)
		at.a.probeNodes.Add(probe.nodes)
		if errors.Is(err, errClaimLimit) {
			ok, err = false, nil
		}
		for _, css := range at.cons {
			for _, cs := range css {
				cs.stack = cs.stack[:0]
			}
		}
		switch {
		case errors.Is(err, errProbeBudget):
			return nil
		case err != nil:
			return err
		case !ok:
			b.infeasibleFrom = rj
			return nil
		}
	}
	return nil
}
