package allocator

import (
	"context"
	"fmt"

	dcel "github.com/dractl/dractl/pkg/core/cel"
)

// Derived attributes (DRADerivedAttributes): a request or subrequest may
// define attributes computed by CEL from each device. Its constraints read
// them instead of the device's own attribute of that name (exact name, no
// short form), so two requests can match devices whose drivers name the
// same property differently, and each firstAvailable subrequest can derive
// it its own way. Values are cached per device and expression; errors are
// not, they end the Allocate call that meets them, as upstream's do.

// derivedEntry is one compiled derived attribute expression.
type derivedEntry struct {
	expr string
	prog *dcel.Program
	err  error // compile error, reported when the attribute is first read
}

// DerivedCompiler is implemented by a SelectorCompiler that also compiles
// derived attribute expressions. Without it the allocator uses pkg/core/cel's
// shared compiler for them.
type DerivedCompiler interface {
	CompileDerived(expr string) (*dcel.Program, error)
}

// derivedAttr returns device d's value of the derived attribute name.
func derivedAttr(ctx context.Context, e *derivedEntry, name string, d *devInfo) (*attrVal, error) {
	if e.err != nil {
		return nil, fmt.Errorf("compile derived attribute %s failed: %w", name, e.err)
	}
	slot := &(*d.t.derivedColumn(e.expr))[d.idx]
	if v := slot.Load(); v != nil {
		return v, nil
	}
	if d.viewErr != nil {
		return nil, fmt.Errorf("evaluate derived attribute %s on device %s failed: %w", name, d.id(), d.viewErr)
	}
	attr, err := e.prog.Attribute(ctx, dcel.Device{Driver: d.t.p.Driver, View: d.view})
	if err != nil {
		return nil, fmt.Errorf("evaluate derived attribute %s on device %s failed: %w", name, d.id(), err)
	}
	v := newAttrVal(attr)
	slot.Store(v)
	return v, nil
}

// attrFor is the value a constraint compares for device d picked for al:
// the alternative's derived attribute of that name if it defines one, else the
// device's own, as the minor compares it (constraintState.compared).
func (at *attempt) attrFor(al *alternative, cs *constraintState, d *devInfo) (*attrVal, error) {
	if e := al.req.derived[cs.name]; e != nil {
		v, err := derivedAttr(at.ctx, e, cs.name, d)
		if err != nil {
			return nil, err
		}
		return cs.compared(v, d)
	}
	return cs.compared(cs.attr(d), d)
}
