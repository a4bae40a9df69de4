package allocator

import (
	"sync"
	"sync/atomic"
)

// resultCache holds what was computed per device of one generation and
// depends only on the device: whether each selector expression matched,
// each attribute's value and each derived attribute's value. It lives as
// long as the table, so a scheduler keeps it across cycles while the
// pool's slices do not change. Columns are allocated when an expression or
// attribute first meets the pool, so memory follows what was asked.
type resultCache struct {
	mu sync.Mutex
	// sel is keyed by the compiled expression (of the Cache), whose
	// pointer hashes faster than its text, every Allocate call.
	sel     map[*exprEntry]*selColumn
	attrs   map[string]*attrColumn
	derived map[string]*attrColumn
}

// maxColumns bounds the columns of each kind a table keeps: a long-running
// scheduler meets ever new selector expressions. Past it the kind's
// columns start over; searches holding a column keep using it.
const maxColumns = 256

// selColumn is one expression's result per device: 0 unknown, 1 match, 2
// no match. Runtime errors are not cached; they abort the Allocate call
// that meets them.
type selColumn []atomic.Uint32

// attrColumn is one attribute's value per device; absentAttr marks a
// device without it.
type attrColumn []atomic.Pointer[attrVal]

const (
	resUnknown uint32 = iota
	resMatch
	resNoMatch
)

func column[K comparable, C any](mu *sync.Mutex, m *map[K]*C, key K, n int32, mk func(int32) C) *C {
	mu.Lock()
	defer mu.Unlock()
	if c, ok := (*m)[key]; ok {
		return c
	}
	if *m == nil || len(*m) >= maxColumns {
		*m = map[K]*C{}
	}
	c := mk(n)
	(*m)[key] = &c
	return &c
}

func (t *genTable) selColumn(e *exprEntry) *selColumn {
	return column(&t.cache.mu, &t.cache.sel, e, t.nDevs, func(n int32) selColumn { return make(selColumn, n) })
}

func (t *genTable) attrColumn(name string) *attrColumn {
	return column(&t.cache.mu, &t.cache.attrs, name, t.nDevs, func(n int32) attrColumn { return make(attrColumn, n) })
}

func (t *genTable) derivedColumn(expr string) *attrColumn {
	return column(&t.cache.mu, &t.cache.derived, expr, t.nDevs, func(n int32) attrColumn { return make(attrColumn, n) })
}
