package allocator

import (
	"context"
	"sync"
	"sync/atomic"

	dcel "github.com/dractl/dractl/pkg/core/cel"
)

// exprEntry is one compiled selector expression.
type exprEntry struct {
	expr string
	sel  Selector
	err  error // compile error, reported when the selector is evaluated
}

// Cache carries compiled selector and derived-attribute expressions over
// to later Allocators, as kube-scheduler's CEL cache does across cycles.
// Results per device are not in it: they live in the pool's table
// (PoolTable), as long as the pool's slices do not change. Allocators that
// share a Cache must use the same SelectorCompiler (or compilers that
// agree). A Cache is safe for concurrent use.
type Cache struct {
	// sel and derivs map an expression to its compiled entry. They are
	// sync.Maps, not a map under a lock, because every Filter of every
	// node reads them and almost never writes: an expression is compiled
	// once per cluster.
	sel    sync.Map // expression → *exprEntry
	derivs sync.Map // expression → *derivedEntry
	// n counts compiles since the maps were last cleared, for
	// maxCompiled. An atomic apart from the maps: the bound may be passed
	// by a few under concurrent compiles, which is all it needs to hold,
	// since it only keeps the cache from growing without end.
	n atomic.Int32
}

// maxCompiled bounds the expressions a Cache keeps; past it, it starts
// over.
const maxCompiled = 4096

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{} }

func (c *Cache) selector(comp SelectorCompiler, expr string) *exprEntry {
	if e, ok := c.sel.Load(expr); ok {
		return e.(*exprEntry)
	}
	e := &exprEntry{expr: expr}
	e.sel, e.err = comp.CompileSelector(expr)
	c.grow()
	// A concurrent compile of the same expression is harmless; keep one.
	got, _ := c.sel.LoadOrStore(expr, e)
	return got.(*exprEntry)
}

func (c *Cache) derived(comp SelectorCompiler, expr string) *derivedEntry {
	if e, ok := c.derivs.Load(expr); ok {
		return e.(*derivedEntry)
	}
	e := &derivedEntry{expr: expr}
	if dc, ok := comp.(DerivedCompiler); ok {
		e.prog, e.err = dc.CompileDerived(expr)
	} else {
		e.prog, e.err = dcel.Default().CompileDerived(expr)
	}
	c.grow()
	got, _ := c.derivs.LoadOrStore(expr, e)
	return got.(*derivedEntry)
}

func (c *Cache) grow() {
	if c.n.Add(1) > maxCompiled {
		c.n.Store(0)
		c.sel.Clear()
		c.derivs.Clear()
	}
}

// eval returns whether device d matches e, whose results for d's table
// are col. Compile and runtime errors are returned as they are; callers
// add claim, request and selector.
func eval(ctx context.Context, e *exprEntry, col *selColumn, d *devInfo) (bool, error) {
	r := &(*col)[d.idx]
	switch r.Load() {
	case resMatch:
		return true, nil
	case resNoMatch:
		return false, nil
	}
	if e.err != nil {
		return false, e.err
	}
	if d.viewErr != nil {
		return false, d.viewErr
	}
	if d.attrErr != nil {
		return false, d.attrErr
	}
	ok, err := e.sel.Matches(ctx, d.t.p.Driver, d.view)
	if err != nil {
		return false, err
	}
	if ok {
		r.Store(resMatch)
	} else {
		r.Store(resNoMatch)
	}
	return ok, nil
}
