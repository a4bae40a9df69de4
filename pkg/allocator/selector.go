package allocator

import (
	"context"
	"sync"
	"sync/atomic"
)

// selectorCache compiles each expression once and remembers, per device,
// whether it matched. Keys are device indices of the Allocator, so the
// cache lives exactly as long as the device table it describes.
type selectorCache struct {
	compiler SelectorCompiler
	n        int
	mu       sync.Mutex
	byExpr   map[string]*exprEntry
}

type exprEntry struct {
	expr string
	sel  Selector
	err  error // compile error, reported when the selector is evaluated
	// results per device: 0 unknown, 1 match, 2 no match. Runtime errors
	// are not cached; they abort the Allocate call that meets them.
	results []atomic.Uint32
}

const (
	resUnknown uint32 = iota
	resMatch
	resNoMatch
)

func newSelectorCache(c SelectorCompiler, n int) *selectorCache {
	return &selectorCache{compiler: c, n: n, byExpr: map[string]*exprEntry{}}
}

func (c *selectorCache) get(expr string) *exprEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byExpr[expr]; ok {
		return e
	}
	e := &exprEntry{expr: expr, results: make([]atomic.Uint32, c.n)}
	e.sel, e.err = c.compiler.CompileSelector(expr)
	c.byExpr[expr] = e
	return e
}

// eval returns whether device g matches. Compile and runtime errors are
// returned as they are; callers add claim, request and selector.
func (a *Allocator) eval(ctx context.Context, e *exprEntry, g int32) (bool, error) {
	switch e.results[g].Load() {
	case resMatch:
		return true, nil
	case resNoMatch:
		return false, nil
	}
	if e.err != nil {
		return false, e.err
	}
	d := &a.devs[g]
	if d.viewErr != nil {
		return false, d.viewErr
	}
	ok, err := e.sel.Matches(ctx, a.pools[d.pool].p.Driver, d.view)
	if err != nil {
		return false, err
	}
	if ok {
		e.results[g].Store(resMatch)
	} else {
		e.results[g].Store(resNoMatch)
	}
	return ok, nil
}
