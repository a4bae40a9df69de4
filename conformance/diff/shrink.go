package diff

import (
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/conformance/scenario"
)

// candidates yields one-step reductions of sc, biggest first.
func candidates(sc *scenario.Scenario, node string) []*scenario.Scenario {
	var out []*scenario.Scenario
	mut := func(f func(c *scenario.Scenario) bool) {
		c := sc.DeepCopy()
		if f(c) {
			out = append(out, c)
		}
	}
	for i := range sc.Nodes {
		if sc.Nodes[i].Name != node {
			mut(func(c *scenario.Scenario) bool { c.Nodes = slices.Delete(c.Nodes, i, i+1); return true })
		}
	}
	for i := range sc.Claims {
		if len(sc.Claims) > 1 {
			mut(func(c *scenario.Scenario) bool { c.Claims = slices.Delete(c.Claims, i, i+1); return true })
		}
	}
	for i := range sc.Allocated {
		mut(func(c *scenario.Scenario) bool { c.Allocated = slices.Delete(c.Allocated, i, i+1); return true })
	}
	for i := range sc.Slices {
		mut(func(c *scenario.Scenario) bool { c.Slices = slices.Delete(c.Slices, i, i+1); return true })
	}
	// Claims: requests, constraints, subrequests, selectors, tolerations.
	for ci, cl := range sc.Claims {
		reqs := cl.Spec.Devices.Requests
		for ri := range reqs {
			if len(reqs) > 1 {
				mut(func(c *scenario.Scenario) bool { removeRequest(c.Claims[ci], ri); return true })
			}
			if n := len(reqs[ri].FirstAvailable); n > 1 {
				for si := 0; si < n; si++ {
					mut(func(c *scenario.Scenario) bool {
						r := &c.Claims[ci].Spec.Devices.Requests[ri]
						r.FirstAvailable = slices.Delete(r.FirstAvailable, si, si+1)
						return true
					})
				}
			}
			if e := reqs[ri].Exactly; e != nil {
				for si := range e.Selectors {
					mut(func(c *scenario.Scenario) bool {
						x := c.Claims[ci].Spec.Devices.Requests[ri].Exactly
						x.Selectors = slices.Delete(x.Selectors, si, si+1)
						return true
					})
				}
				if e.Count > 1 {
					mut(func(c *scenario.Scenario) bool { c.Claims[ci].Spec.Devices.Requests[ri].Exactly.Count--; return true })
				}
			}
		}
		for k := range cl.Spec.Devices.Constraints {
			mut(func(c *scenario.Scenario) bool {
				d := &c.Claims[ci].Spec.Devices
				d.Constraints = slices.Delete(d.Constraints, k, k+1)
				return true
			})
		}
	}
	for ai, cl := range sc.Allocated {
		res := cl.Status.Allocation.Devices.Results
		if len(res) > 1 {
			for k := range res {
				mut(func(c *scenario.Scenario) bool {
					a := c.Allocated[ai].Status.Allocation
					a.Devices.Results = slices.Delete(a.Devices.Results, k, k+1)
					return true
				})
			}
		}
	}
	// Devices, last ones first (they rarely matter for first-fit).
	for si := len(sc.Slices) - 1; si >= 0; si-- {
		for di := len(sc.Slices[si].Spec.Devices) - 1; di >= 0; di-- {
			mut(func(c *scenario.Scenario) bool {
				s := c.Slices[si]
				s.Spec.Devices = slices.Delete(s.Spec.Devices, di, di+1)
				return true
			})
		}
	}
	// Classes no request names.
	used := map[string]bool{}
	for _, cl := range sc.Claims {
		for _, r := range cl.Spec.Devices.Requests {
			if r.Exactly != nil {
				used[r.Exactly.DeviceClassName] = true
			}
			for _, s := range r.FirstAvailable {
				used[s.DeviceClassName] = true
			}
		}
	}
	mut(func(c *scenario.Scenario) bool {
		n := len(c.Classes)
		c.Classes = slices.DeleteFunc(c.Classes, func(cl *resourcev1.DeviceClass) bool { return !used[cl.Name] })
		return len(c.Classes) < n
	})
	return out
}

// removeRequest drops request ri and its mentions in constraints and
// configs; a constraint that named only it goes away.
func removeRequest(c *resourcev1.ResourceClaim, ri int) {
	d := &c.Spec.Devices
	name := d.Requests[ri].Name
	d.Requests = slices.Delete(d.Requests, ri, ri+1)
	var cons []resourcev1.DeviceConstraint
	for _, con := range d.Constraints {
		if len(con.Requests) > 0 {
			con.Requests = slices.DeleteFunc(con.Requests, func(r string) bool { return r == name || strings.HasPrefix(r, name+"/") })
			if len(con.Requests) == 0 {
				continue
			}
		}
		cons = append(cons, con)
	}
	d.Constraints = cons
}
