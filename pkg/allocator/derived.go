package allocator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	dcel "github.com/dractl/dractl/pkg/cel"
)

// Derived attributes (DRADerivedAttributes): a request or subrequest may
// define attributes computed by CEL from each device. Its constraints read
// them instead of the device's own attribute of that name (exact name, no
// short form), so two requests can match devices whose drivers name the
// same property differently, and each firstAvailable subrequest can derive
// it its own way. Values are cached per device and expression; errors are
// not, they end the Allocate call that meets them, as upstream's do.

// derivedEntry is one derived attribute expression and its results.
type derivedEntry struct {
	prog *dcel.Program
	err  error // compile error, reported when the attribute is first read
	// results per slice, per device of the slice; nil until evaluated.
	results []atomic.Pointer[[]atomic.Pointer[attrVal]]
}

// derivedCache holds the entries of one Allocator, by expression.
type derivedCache struct {
	mu     sync.Mutex
	byExpr map[string]*derivedEntry
}

// DerivedCompiler is implemented by a SelectorCompiler that also compiles
// derived attribute expressions. Without it the allocator uses pkg/cel's
// shared compiler for them.
type DerivedCompiler interface {
	CompileDerived(expr string) (*dcel.Program, error)
}

func (a *Allocator) derivedExpr(expr string) *derivedEntry {
	a.derived.mu.Lock()
	defer a.derived.mu.Unlock()
	if e, ok := a.derived.byExpr[expr]; ok {
		return e
	}
	e := &derivedEntry{results: make([]atomic.Pointer[[]atomic.Pointer[attrVal]], len(a.slices))}
	if c, ok := a.opts.Compiler.(DerivedCompiler); ok {
		e.prog, e.err = c.CompileDerived(expr)
	} else {
		e.prog, e.err = dcel.Default().CompileDerived(expr)
	}
	if a.derived.byExpr == nil {
		a.derived.byExpr = map[string]*derivedEntry{}
	}
	a.derived.byExpr[expr] = e
	return e
}

// derivedAttr returns device d's value of the derived attribute name.
func (a *Allocator) derivedAttr(ctx context.Context, e *derivedEntry, name string, d *devInfo) (*attrVal, error) {
	if e.err != nil {
		return nil, fmt.Errorf("compile derived attribute %s failed: %w", name, e.err)
	}
	sl := &a.slices[d.slice]
	vals := e.results[d.slice].Load()
	if vals == nil {
		fresh := make([]atomic.Pointer[attrVal], sl.devEnd-sl.devStart)
		if e.results[d.slice].CompareAndSwap(nil, &fresh) {
			vals = &fresh
		} else {
			vals = e.results[d.slice].Load()
		}
	}
	slot := &(*vals)[d.idx-sl.devStart]
	if v := slot.Load(); v != nil {
		return v, nil
	}
	if d.viewErr != nil {
		return nil, fmt.Errorf("evaluate derived attribute %s on device %s failed: %w", name, a.devID(d), d.viewErr)
	}
	attr, err := e.prog.Attribute(ctx, dcel.Device{Driver: a.pools[d.pool].p.Driver, View: d.view})
	if err != nil {
		return nil, fmt.Errorf("evaluate derived attribute %s on device %s failed: %w", name, a.devID(d), err)
	}
	v := newAttrVal(attr)
	slot.Store(v)
	return v, nil
}

// attrFor is the value a constraint compares for device d picked for al:
// the alt's derived attribute of that name if it defines one, else the
// device's own.
func (at *attempt) attrFor(al *alt, cs *constraintState, d *devInfo) (*attrVal, error) {
	if e := al.derived[cs.col.name]; e != nil {
		return at.a.derivedAttr(at.ctx, e, cs.col.name, d)
	}
	return at.a.attr(cs.col, d), nil
}
