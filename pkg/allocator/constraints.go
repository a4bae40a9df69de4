package allocator

import "slices"

// constraintState is one claim constraint during a search. matchAttribute
// keeps a stack of running intersections (one per device added), so that
// removing the last device restores the previous one; distinctAttribute
// keeps the values of the devices added.
type constraintState struct {
	match bool
	col   *attrCol
	names []string // requests it covers; empty covers all
	stack []*attrVal
}

// covers mirrors upstream: a subrequest is covered when the constraint
// names its parent request or "parent/sub".
func (c *constraintState) covers(al *alt) bool {
	if len(c.names) == 0 {
		return true
	}
	if al.parent != "" {
		return slices.Contains(c.names, al.parent) || slices.Contains(c.names, al.name)
	}
	return slices.Contains(c.names, al.name)
}

// admits reports whether a device with value v could be added now.
func (c *constraintState) admits(v *attrVal) bool {
	if v == nil {
		return false
	}
	if c.match {
		return len(c.stack) == 0 || c.stack[len(c.stack)-1].overlaps(v)
	}
	for _, x := range c.stack {
		if x.overlaps(v) {
			return false
		}
	}
	return true
}

// add admits and records v; the caller has checked admits.
func (c *constraintState) add(v *attrVal) {
	if c.match && len(c.stack) > 0 {
		// Scalars (the common case) intersect to themselves.
		if top := c.stack[len(c.stack)-1]; len(top.ints)+len(top.strs) != 1 || len(v.ints)+len(v.strs) != 1 {
			v = top.intersect(v)
		}
	}
	c.stack = append(c.stack, v)
}

func (c *constraintState) remove() { c.stack = c.stack[:len(c.stack)-1] }
