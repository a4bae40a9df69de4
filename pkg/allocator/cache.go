package allocator

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/api"
)

// Cache keeps what Allocators learn about ResourceSlices so that the next
// Allocator need not learn it again. A scheduler builds a new Allocator
// whenever the cluster state changes, most often because a claim was
// allocated; that changes no slice, so the compiled selectors, per-device
// selector results and per-device attribute values are still right.
//
// Only results that follow from one slice's content (plus the selector
// expression or attribute name) are kept. Device tables are not: what they
// hold about counters, allocated devices and shares comes from
// Input.Allocated, and their indices from the set of pools.
//
// Entries are keyed by slice identity: the *api.ResourceSlice pointer
// together with its UID, ResourceVersion and Generation. Slices must
// therefore not be mutated in place; pass a new object when a slice
// changes (an informer does). The cached results then belong to the old
// object and are never read for the new one.
//
// Compiled selectors are cached by expression, so Allocators that share a
// Cache must use the same SelectorCompiler (or compilers that agree).
//
// An entry that no Allocator among the last CacheKeep built with the Cache
// has used is dropped; Forget drops a slice's entry at once. A Cache is
// safe for concurrent use.
type Cache struct {
	mu       sync.Mutex
	allocs   uint64 // Allocators built with the Cache so far
	compiled map[string]*compiledEntry
	slices   map[sliceKey]*sliceEntry
}

// CacheKeep is how many recent Allocators keep a Cache entry alive. It
// covers the Allocators a scheduler typically has in use at once (the
// current one and a few still finishing) without keeping slices that were
// deleted or replaced for long.
const CacheKeep = 16

// NewCache returns an empty Cache.
func NewCache() *Cache {
	return &Cache{compiled: map[string]*compiledEntry{}, slices: map[sliceKey]*sliceEntry{}}
}

type compiledEntry struct {
	sel      Selector
	err      error
	lastUsed atomic.Uint64
}

type sliceKey struct {
	s   *api.ResourceSlice
	uid types.UID
	rv  string
	gen int64
}

func keyOf(s *api.ResourceSlice) sliceKey {
	return sliceKey{s: s, uid: s.UID, rv: s.ResourceVersion, gen: s.Generation}
}

// sliceEntry holds per-device results for one slice, indexed by the
// device's position in the slice.
type sliceEntry struct {
	nDevs    int
	lastUsed atomic.Uint64
	mu       sync.Mutex
	sel      map[string]*[]atomic.Uint32           // by expression
	attrs    map[string]*[]atomic.Pointer[attrVal] // by attribute name
}

// Forget drops everything cached for s, e.g. when an informer reports that
// it was updated or deleted.
func (c *Cache) Forget(s *api.ResourceSlice) {
	if c == nil || s == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.slices, keyOf(s))
}

// Len reports how many slices have cached results.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slices)
}

// begin registers a new Allocator and returns its sequence number. Every
// CacheKeep Allocators, entries unused since the last CacheKeep are
// dropped, so the sweep costs amortize to a fraction of an entry per New.
func (c *Cache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.allocs++
	n := c.allocs
	if n%CacheKeep == 0 {
		for k, e := range c.slices {
			if e.lastUsed.Load()+CacheKeep <= n {
				delete(c.slices, k)
			}
		}
		for k, e := range c.compiled {
			if e.lastUsed.Load()+CacheKeep <= n {
				delete(c.compiled, k)
			}
		}
	}
	return n
}

func (c *Cache) compile(comp SelectorCompiler, expr string, seq uint64) (Selector, error) {
	c.mu.Lock()
	e, ok := c.compiled[expr]
	c.mu.Unlock()
	if !ok {
		// Compiling outside the lock keeps other Allocators going; a
		// duplicate compile of the same expression is harmless.
		e = &compiledEntry{}
		e.sel, e.err = comp.CompileSelector(expr)
		c.mu.Lock()
		if prev, ok := c.compiled[expr]; ok {
			e = prev
		} else {
			c.compiled[expr] = e
		}
		c.mu.Unlock()
	}
	bump(&e.lastUsed, seq)
	return e.sel, e.err
}

// slice returns the entry for s, nil when s no longer has nDevs devices
// (it was mutated in place against the contract; sharing would then index
// out of range).
func (c *Cache) slice(s *api.ResourceSlice, nDevs int, seq uint64) *sliceEntry {
	k := keyOf(s)
	c.mu.Lock()
	e, ok := c.slices[k]
	if !ok {
		e = &sliceEntry{nDevs: nDevs}
		c.slices[k] = e
	}
	c.mu.Unlock()
	if e.nDevs != nDevs {
		return nil
	}
	bump(&e.lastUsed, seq)
	return e
}

func bump(u *atomic.Uint64, seq uint64) {
	for {
		old := u.Load()
		if old >= seq || u.CompareAndSwap(old, seq) {
			return
		}
	}
}

func (e *sliceEntry) selResults(expr string) *[]atomic.Uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.sel[expr]
	if !ok {
		if e.sel == nil {
			e.sel = map[string]*[]atomic.Uint32{}
		}
		fresh := make([]atomic.Uint32, e.nDevs)
		r = &fresh
		e.sel[expr] = r
	}
	return r
}

func (e *sliceEntry) attrVals(name string) *[]atomic.Pointer[attrVal] {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.attrs[name]
	if !ok {
		if e.attrs == nil {
			e.attrs = map[string]*[]atomic.Pointer[attrVal]{}
		}
		fresh := make([]atomic.Pointer[attrVal], e.nDevs)
		r = &fresh
		e.attrs[name] = r
	}
	return r
}
