package allocator

import (
	"context"
	"sync"
	"sync/atomic"
)

// selectorCache compiles each expression once and remembers, per device,
// whether it matched. Results are kept per slice and allocated when the
// expression first meets the slice, so memory follows what nodes looked at,
// not the size of the cluster, and so that a shared Cache can hand over a
// slice's results to the next Allocator.
type selectorCache struct {
	compiler SelectorCompiler
	nSlices  int
	shared   *Cache
	seq      uint64
	mu       sync.Mutex
	byExpr   map[string]*exprEntry
}

type exprEntry struct {
	expr string
	sel  Selector
	err  error // compile error, reported when the selector is evaluated
	// results per slice, per device of the slice: 0 unknown, 1 match, 2
	// no match. Runtime errors are not cached; they abort the Allocate call
	// that meets them.
	results []atomic.Pointer[[]atomic.Uint32]
}

const (
	resUnknown uint32 = iota
	resMatch
	resNoMatch
)

func newSelectorCache(c SelectorCompiler, nSlices int, shared *Cache, seq uint64) *selectorCache {
	return &selectorCache{compiler: c, nSlices: nSlices, shared: shared, seq: seq, byExpr: map[string]*exprEntry{}}
}

func (c *selectorCache) get(expr string) *exprEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byExpr[expr]; ok {
		return e
	}
	e := &exprEntry{expr: expr, results: make([]atomic.Pointer[[]atomic.Uint32], c.nSlices)}
	if c.shared != nil {
		e.sel, e.err = c.shared.compile(c.compiler, expr, c.seq)
	} else {
		e.sel, e.err = c.compiler.CompileSelector(expr)
	}
	c.byExpr[expr] = e
	return e
}

// eval returns whether device g matches. Compile and runtime errors are
// returned as they are; callers add claim, request and selector.
func (a *Allocator) eval(ctx context.Context, e *exprEntry, d *devInfo) (bool, error) {
	sl := &a.slices[d.slice]
	res := e.results[d.slice].Load()
	if res == nil {
		var fresh *[]atomic.Uint32
		if se := a.sharedSlice(d.slice); se != nil {
			fresh = se.selResults(e.expr)
		} else {
			f := make([]atomic.Uint32, sl.devEnd-sl.devStart)
			fresh = &f
		}
		if !e.results[d.slice].CompareAndSwap(nil, fresh) {
			res = e.results[d.slice].Load()
		} else {
			res = fresh
		}
	}
	r := &(*res)[d.idx-sl.devStart]
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
	ok, err := e.sel.Matches(ctx, a.pools[d.pool].p.Driver, d.view)
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

// sharedSlice returns the shared Cache's entry for slice si, nil without a
// Cache.
func (a *Allocator) sharedSlice(si int32) *sliceEntry {
	if a.opts.Cache == nil {
		return nil
	}
	sl := &a.slices[si]
	return a.opts.Cache.slice(sl.s.ResourceSlice, int(sl.devEnd-sl.devStart), a.seq)
}
