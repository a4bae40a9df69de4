package allocator

import "fmt"

// constraintState is one claim constraint during a search. matchAttribute
// keeps a stack of running intersections (one per device added), so that
// removing the last device restores the previous one; distinctAttribute
// keeps the values of the devices added.
type constraintState struct {
	match bool
	// lists: DRAListTypeAttributes is on, values are sets that match when
	// they intersect. Off, only scalars are compared, as upstream did
	// before lists existed.
	lists bool
	// listErr (ruleListValueWithoutGate): without lists, a list value is
	// an error rather than a value that matches nothing.
	listErr bool
	// noBuild (ruleVersionIgnoresBuild): versions are compared without
	// their build metadata.
	noBuild bool
	name    string   // the attribute compared
	names   []string // requests it covers; empty covers all
	stack   []*attrVal
	// cols are the attribute's columns of each table met.
	cols []tableAttr
}

type tableAttr struct {
	t   *genTable
	col *attrColumn
}

// admits reports whether a device with value v could be added now.
func (c *constraintState) admits(v *attrVal) bool {
	if v == nil {
		return false
	}
	if c.lists {
		if v.kind == kindNone {
			return false
		}
	} else if c.unknown(v) {
		// Upstream's scalar comparison accepts anything as the first value
		// and then finds nothing equal to it.
		return len(c.stack) == 0
	}
	if c.match {
		if len(c.stack) == 0 {
			return true
		}
		top := c.stack[len(c.stack)-1]
		return !c.unknown(top) && top.overlaps(v)
	}
	for _, x := range c.stack {
		if !c.unknown(x) && x.overlaps(v) {
			return false
		}
	}
	return true
}

// unknown: without DRAListTypeAttributes, a value that is not a scalar.
func (c *constraintState) unknown(v *attrVal) bool {
	return !c.lists && (v.list || v.kind == kindNone)
}

// add admits and records v; the caller has checked admits.
func (c *constraintState) add(v *attrVal) {
	if c.match && len(c.stack) > 0 && !c.unknown(c.stack[len(c.stack)-1]) {
		// Scalars (the common case) intersect to themselves.
		if top := c.stack[len(c.stack)-1]; len(top.ints)+len(top.strs) != 1 || len(v.ints)+len(v.strs) != 1 {
			v = top.intersect(v)
		}
	}
	c.stack = append(c.stack, v)
}

func (c *constraintState) remove() { c.stack = c.stack[:len(c.stack)-1] }

// compared is the value the constraint compares for device d's attribute
// v (nil: absent), as the allocator's minor does.
func (c *constraintState) compared(v *attrVal, d *devInfo) (*attrVal, error) {
	switch {
	case v == nil:
		return nil, nil
	case c.listErr && !c.lists && v.list:
		return nil, fmt.Errorf("device %s: unsupported attribute value for %s", d.id(), c.name)
	case c.noBuild && v.kind == kindVersion:
		return v.withoutBuild(), nil
	}
	return v, nil
}
