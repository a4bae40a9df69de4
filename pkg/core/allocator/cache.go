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
	// mu guards the three column maps, not the columns: a column is an
	// array of atomics that whoever computes a cell first fills, so
	// readers of a cell take no lock. One lock for the three maps, since
	// each is written only when an expression or attribute first meets
	// the pool.
	mu sync.Mutex
	// sel is keyed by the compiled expression (of the Cache), whose
	// pointer hashes faster than its text, every Allocate call.
	sel     map[*exprEntry]*selColumn
	attrs   map[string]*attrColumn
	derived map[string]*attrColumn
	// recentSel are the sel columns asked for last, read without the
	// lock: every Filter asks for the columns of its request's
	// expressions, and on a cluster of many nodes the table has left the
	// CPU caches since the node's last Filter, so the lock and the map
	// lookup would each cost memory accesses that miss.
	recentSel atomic.Pointer[recentCols]
}

// recentCols is an immutable list of the last columns asked for, the
// newest first.
type recentCols struct {
	n int
	e [4]struct {
		key *exprEntry
		col *selColumn
	}
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
	r := t.cache.recentSel.Load()
	if r != nil {
		for i := range r.e[:r.n] {
			if r.e[i].key == e {
				return r.e[i].col
			}
		}
	}
	col := column(&t.cache.mu, &t.cache.sel, e, t.nDevs, func(n int32) selColumn { return make(selColumn, n) })
	// Concurrent callers may each publish a list; any of them will do.
	next := &recentCols{n: 1}
	next.e[0].key, next.e[0].col = e, col
	if r != nil {
		for i := range r.e[:r.n] {
			if next.n == len(next.e) {
				break
			}
			next.e[next.n] = r.e[i]
			next.n++
		}
	}
	t.cache.recentSel.Store(next)
	return col
}

func (t *genTable) attrColumn(name string) *attrColumn {
	return column(&t.cache.mu, &t.cache.attrs, name, t.nDevs, func(n int32) attrColumn { return make(attrColumn, n) })
}

func (t *genTable) derivedColumn(expr string) *attrColumn {
	return column(&t.cache.mu, &t.cache.derived, expr, t.nDevs, func(n int32) attrColumn { return make(attrColumn, n) })
}
