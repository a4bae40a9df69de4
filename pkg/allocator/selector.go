package allocator

import (
	"context"
	"sync"
	"sync/atomic"
)

// selectorCache compiles each expression once and remembers, per device,
// whether it matched. Results are kept per pool and allocated when the
// expression first meets the pool, so memory follows what nodes looked at,
// not the size of the cluster.
type selectorCache struct {
	compiler SelectorCompiler
	nPools   int
	mu       sync.Mutex
	byExpr   map[string]*exprEntry
}

type exprEntry struct {
	expr string
	sel  Selector
	err  error // compile error, reported when the selector is evaluated
	// results per pool, per pool-local device: 0 unknown, 1 match, 2 no
	// match. Runtime errors are not cached; they abort the Allocate call
	// that meets them.
	results []atomic.Pointer[[]atomic.Uint32]
}

const (
	resUnknown uint32 = iota
	resMatch
	resNoMatch
)

func newSelectorCache(c SelectorCompiler, nPools int) *selectorCache {
	return &selectorCache{compiler: c, nPools: nPools, byExpr: map[string]*exprEntry{}}
}

func (c *selectorCache) get(expr string) *exprEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byExpr[expr]; ok {
		return e
	}
	e := &exprEntry{expr: expr, results: make([]atomic.Pointer[[]atomic.Uint32], c.nPools)}
	e.sel, e.err = c.compiler.CompileSelector(expr)
	c.byExpr[expr] = e
	return e
}

// eval returns whether device g matches. Compile and runtime errors are
// returned as they are; callers add claim, request and selector.
func (a *Allocator) eval(ctx context.Context, e *exprEntry, d *devInfo) (bool, error) {
	res := e.results[d.pool].Load()
	if res == nil {
		fresh := make([]atomic.Uint32, a.pools[d.pool].nDevs)
		if !e.results[d.pool].CompareAndSwap(nil, &fresh) {
			res = e.results[d.pool].Load()
		} else {
			res = &fresh
		}
	}
	r := &(*res)[d.idx]
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
